-- sched_remove: delete a recurring schedule; no tick fires after it.  Jobs
-- it fired already stay (cancel them as any job).  Keys as sched_add.
-- ARGV: name
-- Returns 1 when the schedule existed, 0 when not.
local name = arg_str(1, 'name')
if arg_fault then return arg_refusal('sched_remove') end
redis.call('ZREM', KEYS[8], name)
return redis.call('HDEL', KEYS[7], name)
