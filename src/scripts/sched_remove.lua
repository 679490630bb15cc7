-- sched_remove: delete a recurring schedule; no tick fires after it.  A
-- tick fires up to 3 s ahead (its job due at the tick): the jobs it fired
-- for ticks that are not yet due are deleted with it, so that none of them
-- runs after the removal.  Jobs already due, running or done stay (cancel
-- them as any job), as do run-now's.  Keys as sched_add.
-- ARGV: name
-- Returns 1 when the schedule existed, 0 when not.
local now = now_ms()
local name = arg_str(1, 'name')
if arg_fault then return arg_refusal('sched_remove') end
local ahead = fired_ahead(name, now)
if #ahead > 0 then
  del_records(ahead)
  redis.call('ZREM', KEYS[2], unpack(ahead))
end
redis.call('ZREM', KEYS[8], name)
redis.call('HDEL', KEYS[7], name .. '@')
return redis.call('HDEL', KEYS[7], name)
