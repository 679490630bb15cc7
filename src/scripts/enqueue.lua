-- enqueue: create a job record and schedule it.
-- ARGV: wake_channel, id ('' = generate), type, payload, when ('delay'|'at'),
--       ms (delay, or absolute Unix ms for 'at'), max_attempts (0 = the
--       consumer's default), replace ('1' = reschedule an existing job)
-- Returns {status, id, due_ms, now_ms}; status is 'ok', 'replaced',
-- 'exists' (id taken and replace not asked) or 'running' (a job with this
-- id is being processed: it cannot be replaced under its worker).
local now = now_ms()
local id = ARGV[2]
local due = tonumber(ARGV[6])
if ARGV[5] ~= 'at' then due = now + due end

local status = 'ok'
if id == '' then
  -- Generated ids are decimal; producers' own ids may not be all digits.
  repeat
    id = format('%d', redis.call('HINCRBY', KEYS[5], 'seq', 1))
  until not get_record(id)
elseif get_record(id) then
  if ARGV[8] ~= '1' then return { 'exists', id, 0, now } end
  if redis.call('ZSCORE', KEYS[3], id) then return { 'running', id, 0, now } end
  status = 'replaced'
end

local before = head_due(KEYS[2])
set_record(id, encode({ type = ARGV[3], payload = ARGV[4], attempts = 0,
  max = tonumber(ARGV[7]), created = now, due = due, err = '' }))
if status == 'replaced' then redis.call('ZREM', KEYS[4], id) end
redis.call('ZADD', KEYS[2], due, id)
wake_if_sooner(ARGV[1], before, due)
return { status, id, due, now }
