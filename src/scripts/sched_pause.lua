-- sched_pause: pause a recurring schedule, or resume it.  Keys as
-- sched_add.
-- ARGV: name, 'pause' | 'resume', then for resume: next_ms (its next tick
--       after now, computed by the caller: Lua has no time zones), expr and
--       tz (the definition's, as the caller read them with sched_list)
-- Pause: no tick fires after it returns; the jobs it fired ahead for
-- ticks not yet due are taken back (as sched_remove does); the definition
-- stays, and sched_add keeps it paused (see the prelude's SCHED_PAUSED).
-- Resume: the schedule fires again from next_ms on; the ticks it missed
-- while paused are not made up.
-- Returns {status, ms}: 'paused' (ms: since), 'already' (was paused: ms
-- since then), 'resumed' (ms: the next tick), 'running' (was not paused:
-- ms its next tick), 'changed' (the definition is not the expr and tz
-- given: read it again; nothing written) or 'missing' (no such schedule).
local now = now_ms()
local name = ARGV[1]
if not (name and is_plain(name, 128) and not find(name, '@')) then
  arg_bad('name', name, "a schedule name (1..128 printable bytes, no spaces, no '@')")
end
local mode = arg_one_of(2, 'mode', 'pause', 'resume')
local next_fire = 0
if mode == 'resume' then
  next_fire = arg_int(3, 'next_ms', 0, now + MAX_AHEAD_MS)
  arg_str(4, 'expr')
  arg_str(5, 'tz')
end
if arg_fault then return arg_refusal('sched_pause') end

local raw = redis.call('HGET', KEYS[7], name)
local score = tonumber(redis.call('ZSCORE', KEYS[8], name))
if not raw or not score then return { 'missing', 0 } end
local paused = score == SCHED_PAUSED
if mode == 'pause' then
  if paused then
    return { 'already', tonumber(redis.call('HGET', KEYS[7], sched_paused_field(name))) or 0 }
  end
  take_back_ahead(name, now)
  redis.call('HSET', KEYS[7], sched_paused_field(name), now)
  redis.call('ZADD', KEYS[8], SCHED_PAUSED, name)
  return { 'paused', now }
end
if not paused then return { 'running', score } end
local ok, d = false, nil
if sub(raw, 1, 2) == '1:' then ok, d = pcall(cmsgpack.unpack, sub(raw, 3)) end
if not (ok and type(d) == 'table' and d[1] == ARGV[4] and d[2] == ARGV[5]) then
  return { 'changed', 0 }
end
redis.call('HDEL', KEYS[7], sched_paused_field(name))
redis.call('ZADD', KEYS[8], next_fire, name)
return { 'resumed', next_fire }
