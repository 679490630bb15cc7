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
local ahead, ids = fired_ahead(name, now), {}
for i = 1, #ahead, 2 do ids[#ids + 1] = ahead[i] end
if #ids > 0 then
  del_records(ids)
  redis.call('ZREM', KEYS[2], unpack(ids))
end
redis.call('ZREM', KEYS[8], name)
redis.call('HDEL', KEYS[7], name .. '@')
return redis.call('HDEL', KEYS[7], name)
