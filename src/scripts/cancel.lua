-- cancel: end a job that has not finished: one still waiting is deleted;
-- one running ends here, cancelled, and the worker that runs it is told
-- to stop it (below).  Either way the job is never retried, never dead,
-- and counted in meta's jobs_cancelled.
-- ARGV: id
-- Returns 'cancelled', or why not: 'dead' (use purge), 'notfound' (no
-- such job: it finished, or never was).  ('running' came from versions
-- that could not cancel a running job.)
--
-- A producer's hot path (most order timeouts are cancelled): a delayed
-- job of normal priority, in a queue without dedupe windows, costs the
-- five commands that find, delete and count it, above the line where the
-- prelude's functions are made.  Any other call (a bad id, another level,
-- a job not delayed, a bucket of the wrong type, a queue with windows)
-- goes on below it, having written nothing.
local id = ARGV[1]
if id and id ~= '' and #id <= 256 and not find(id, '[^!-~]')
   and redis.call('ZSCORE', KEYS[2], id)
   and redis.call('EXISTS', sub(KEYS[5], 1, -5) .. 'unique') == 0 then
  -- The record first: if its bucket cannot be reached (see the prelude's
  -- record_key), nothing has changed.
  local rk = KEYS[1]
  if find(id, '^%d+$') then rk = rk .. ':' .. sub(id, 1, -3) end
  if type(redis.pcall('HDEL', rk, id)) == 'number' then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HINCRBY', KEYS[5], 'jobs_cancelled', '1')
    return 'cancelled'
  end
end

-- prelude: here
id = arg_id(1, 'id')
if arg_fault then return arg_refusal('cancel') end
local key = delayed_find(id)
if key then
  -- As above; a bucket of the wrong type holds no record: the prelude's
  -- record_cmd logs it and goes on.  A job with a dedupe window leaves
  -- its tombstone.
  local tombs = unique_plan({ id })
  del_records({ id })
  redis.call('ZREM', key, id)
  unique_apply(tombs)
  redis.call('HINCRBY', KEYS[5], 'jobs_cancelled', '1')
  return 'cancelled'
end

-- A running job (in processing: its lease may even have lapsed, with
-- the reaper not there yet).  It ends now: out of processing and the
-- lease hash, so the worker's ack or fail under its fence is refused as
-- stale and no reap or recover brings it back; its next run (debounce)
-- goes with it (an expiry entry goes when next looked at: its record is
-- gone).  Its record becomes a "C" tombstone (the prelude's
-- tombstone_of) kept until its lease would have ended, or its dedupe
-- window if that is later: the run may still be stopping until then, so
-- no new job of the id may start.  The wake channel tells the daemons
-- "cancel <fence> <id> <tag>" (tag: the partition's hash tag): the one
-- whose worker runs it under that fence stops it (docs/protocol.md,
-- "Cancelling a running job").  Everything is read before the first
-- write.
local lease = redis.call('ZSCORE', KEYS[3], id)
if lease then
  local fence = redis.call('HGET', KEYS[6], id)
  if not (fence and find(fence, '^%d+$')) then fence = '0' end
  local raw = get_record(id)
  local now = now_ms()
  local until_ms = math.max(tonumber(lease), now)
  local uk, zk = unique_keys()
  local u = redis.call('HGET', uk, id)
  local uc, uw = match(u or '', '^(%-?%d+) (%d+)$')
  local j = uc and decode(raw)
  if j and j.created == tonumber(uc) then
    until_ms = math.max(until_ms, now + tonumber(uw))
  end
  set_record(id, format('C:%d:%d:%s', now, until_ms, fence))
  redis.call('ZADD', zk, format('%d', until_ms), id)
  if u then redis.call('HDEL', uk, id) end
  redis.call('HDEL', next_key(), id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[6], id)
  redis.call('HINCRBY', KEYS[5], 'jobs_cancelled', '1')
  redis.call('PUBLISH', sub(KEYS[5], 1, -5) .. 'wake',
             'cancel ' .. fence .. ' ' .. id .. ' ' .. match(KEYS[5], '{(.*)}'))
  return 'cancelled'
end
if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
return 'notfound'
