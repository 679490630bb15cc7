#!lua flags=no-writes
-- show: one job and where it stands.
-- ARGV: id
-- Returns {state, type, payload, attempts, max_attempts, created_ms, due_ms,
--          fence, last_error, state_ms, now_ms} where state is 'delayed',
-- 'processing' (state_ms = lease deadline), 'dead' (state_ms = time of
-- death) or 'orphan' (a record in no set); or {'notfound'}.
local id = ARGV[1]
local raw = get_record(id)
if not raw then return { 'notfound' } end
local now = now_ms()
local state, at = 'orphan', 0
local s = redis.call('ZSCORE', KEYS[2], id)
if s then state, at = 'delayed', s else
  s = redis.call('ZSCORE', KEYS[3], id)
  if s then state, at = 'processing', s else
    s = redis.call('ZSCORE', KEYS[4], id)
    if s then state, at = 'dead', s end
  end
end
local j = decode(raw)
if not j then return { 'unreadable', '', raw, 0, 0, 0, 0, 0, '', tonumber(at), now } end
-- A job in processing is in its attempt attempts + 1, under the fence of
-- the claim that holds it; any other has no fence (0).
local attempts, fence = j.attempts, 0
if state == 'processing' then
  attempts = attempts + 1
  fence = tonumber(redis.call('HGET', KEYS[6], id)) or 0
end
return { state, j.type, j.payload, attempts, j.max, j.created, j.due,
         fence, j.err, tonumber(at), now }
