-- resume: undo pause.  Deletes the meta field `paused` and tells every
-- worker on the wake channel ("resume <now_ms>"): they claim at once, and
-- the due backlog runs with its lateness measured from each job's own due
-- time (nothing is rescheduled).  Resuming a queue that is not paused
-- changes nothing (the workers are told again).
-- ARGV: wake_channel
-- Returns {now_ms, since_ms (when the pause began; -1: it was not paused)}
local channel = arg_str(1, 'wake_channel')
if #ARGV > 1 then arg_bad('argument 2', ARGV[2], 'expected: resume takes one') end
if arg_fault then return arg_refusal('resume') end
local now = now_ms()
local since = tonumber(redis.call('HGET', KEYS[5], 'paused')) or -1
redis.call('HDEL', KEYS[5], 'paused')
if channel ~= '' then redis.call('PUBLISH', channel, format('resume %d', now)) end
return { now, since }
