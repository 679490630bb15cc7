-- sched_remove: delete a recurring schedule; no tick fires after it.  A
-- tick fires up to 3 s ahead (its job due at the tick): the jobs it fired
-- for ticks that are not yet due are deleted with it, so that none of them
-- runs after the removal.  Jobs already due, running or done stay (cancel
-- them as any job), as do run-now's.  Keys as sched_add.
-- ARGV: name
-- Returns 1 when the schedule existed, 0 when not.
local now = now_ms()
local name = ARGV[1]
if not (name and is_plain(name, 128) and not find(name, '@')) then
  arg_bad('name', name, "a schedule name (1..128 printable bytes, no spaces, no '@')")
end
if arg_fault then return arg_refusal('sched_remove') end
take_back_ahead(name, now)
redis.call('ZREM', KEYS[8], name)
redis.call('HDEL', KEYS[7], sched_paused_field(name))
return redis.call('HDEL', KEYS[7], name)
