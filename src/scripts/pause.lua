-- pause: stop the queue's claims until resume.  The meta hash's field
-- `paused` holds the server time (ms) the pause began; while it exists
-- the claim script hands out no job (it answers "paused").  Every worker
-- is told on the wake channel ("pause <now_ms>"), so that idle ones stop
-- claiming and busy ones start no further job of the batch in hand.
-- Pausing a paused queue keeps the first time (and tells the workers
-- again).  A queue no job was ever enqueued to may be paused: its workers
-- then start paused.
-- ARGV: wake_channel
-- Returns {now_ms, since_ms, was_paused (0 or 1)}
local channel = arg_str(1, 'wake_channel')
if #ARGV > 1 then arg_bad('argument 2', ARGV[2], 'expected: pause takes one') end
if arg_fault then return arg_refusal('pause') end
local now = now_ms()
local since = tonumber(redis.call('HGET', KEYS[5], 'paused'))
local was = since and 1 or 0
if not since then
  since = now
  redis.call('HSET', KEYS[5], 'paused', format('%d', since))
end
if channel ~= '' then redis.call('PUBLISH', channel, format('pause %d', now)) end
return { now, since, was }
