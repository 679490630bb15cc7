-- sched_add: store a recurring schedule's definition and its first fire
-- time.  Keys: the queue's six, then KEYS[7] schedules (hash: name ->
-- definition) and KEYS[8] schedule_due (zset: name by next fire time, ms).
-- ARGV: name, expr, tz ('' = UTC), type, payload, max_attempts (0 = the
--       consumer's default), catch_up ('one'|'all'|'none'), next_ms (the
--       first fire time, computed by the caller: Lua has no time zones),
--       replace ('1' = overwrite a schedule of that name; '2' = declare:
--       overwrite it only when its definition differs, so that an unchanged
--       schedule keeps its next tick, as delayqd does for its config file's)
-- Returns {status, next_ms}: status 'ok', 'replaced', 'same' (declared
-- unchanged: nothing written, next_ms is the stored one), or 'exists' (the
-- name is taken and replace was not asked; nothing is written).  A paused
-- schedule (sched_pause) stays paused when it is replaced or declared:
-- next_ms is then -1.
-- A definition is "1:" followed by a MessagePack array {expr, tz, type,
-- payload, max_attempts, catch_up, created_ms}.
local now = now_ms()
local name = ARGV[1]
if not (name and is_plain(name, 128) and not find(name, '@')) then
  arg_bad('name', name, "a schedule name (1..128 printable bytes, no spaces, no '@')")
end
local expr = ARGV[2]
if not (expr and #expr > 0 and #expr <= 256) then
  arg_bad('expr', expr, 'a schedule expression (1..256 bytes)')
end
local tz = ARGV[3]
if not (tz and (tz == '' or is_plain(tz, 64))) then
  arg_bad('tz', tz, 'a time zone name (0..64 printable bytes)')
end
local jtype = ARGV[4]
if not (jtype and is_plain(jtype, 128) and jtype ~= '*') then
  arg_bad('type', jtype, "a job type (1..128 printable bytes, no spaces, not '*')")
end
local payload = arg_str(5, 'payload')
local max = arg_int(6, 'max_attempts', 0, MAX_ATTEMPTS)
local catch_up = ARGV[7]
if catch_up ~= 'one' and catch_up ~= 'all' and catch_up ~= 'none' then
  arg_bad('catch_up', catch_up, "'one', 'all' or 'none'")
end
local next_fire = arg_int(8, 'next_ms', 0, now + MAX_AHEAD_MS)
local replace = ARGV[9]
if replace ~= '0' and replace ~= '1' and replace ~= '2' then
  arg_bad('replace', replace, "'0', '1' or '2'")
end
if arg_fault then return arg_refusal('sched_add') end

local status = 'ok'
local def = cmsgpack.pack({ expr, tz, jtype, payload, max, catch_up })
local old = redis.call('HGET', KEYS[7], name)
if old then
  local stored = tonumber(redis.call('ZSCORE', KEYS[8], name))
  if replace == '0' then return { 'exists', stored or 0 } end
  -- The stored definition without its created_ms (the seventh element).
  local ok, d = pcall(cmsgpack.unpack, sub(old, 3))
  local paused = stored == SCHED_PAUSED
  if replace == '2' and stored and sub(old, 1, 2) == '1:' and ok and type(d) == 'table'
     and cmsgpack.pack({ d[1], d[2], d[3], d[4], d[5], d[6] }) == def then
    return { 'same', paused and -1 or stored }
  end
  status = 'replaced'
  if paused then next_fire = -1 end
end
redis.call('HSET', KEYS[7], name, '1:' .. cmsgpack.pack({ expr, tz, jtype, payload,
  max, catch_up, now }))
redis.call('ZADD', KEYS[8], next_fire < 0 and SCHED_PAUSED or next_fire, name)
return { status, next_fire }
