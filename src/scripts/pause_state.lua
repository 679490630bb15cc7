#!lua flags=no-writes
-- pause_state: whether the queue is paused, for workers that may have
-- missed a message on the wake channel and for libdelayq's dq_paused.
-- ARGV: none
-- Returns {now_ms, since_ms (when the pause began; -1: not paused)}
if #ARGV > 0 then arg_bad('argument 1', ARGV[1], 'expected: pause_state takes none') end
if arg_fault then return arg_refusal('pause_state') end
return { now_ms(), tonumber(redis.call('HGET', KEYS[5], 'paused')) or -1 }
