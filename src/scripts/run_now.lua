-- run_now: make a delayed job due now, keeping its priority, attempts and
-- record; its due time in the record becomes now too, so that a release
-- or a retry later measures from it.
-- ARGV: wake_channel, id
-- Returns 'ran' (it is due now), or why not: 'running' (a worker holds
-- it), 'dead' (use requeue), 'notfound'.  A delayed job whose record
-- cannot be read is left where it is ('notfound' is not said of it: the
-- reply is an error naming why), so that the reaper's fsck deals with it.
local channel = arg_str(1, 'wake_channel')
local id = arg_id(2, 'id')
if arg_fault then return arg_refusal('run_now') end
local key = delayed_find(id)
if not key then
  if redis.call('ZSCORE', KEYS[3], id) then return 'running' end
  if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
  return 'notfound'
end
local raw = get_record(id)              -- reads first (see the prelude)
local j, why = read_record(raw)
if not j then
  return redis.error_reply('ERR delayq: run_now: the record of job ' .. shown(id)
                           .. ' cannot be read: ' .. why)
end
local before = head_due_all()
local now = now_ms()
if j.due > now then
  j.due = now
  set_record(id, encode(j))
  redis.call('ZADD', key, now, id)
  wake_if_sooner(channel, before, now)
end
return 'ran'
