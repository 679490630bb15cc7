#!lua flags=no-writes
-- sched_list: a queue's recurring schedules, soonest first.  Keys as
-- sched_add.
-- ARGV: within_ms (-1: all; otherwise only those due within this many ms
--       from now), limit (the most to return, 1..10000), optional name
--       (only that schedule)
-- Returns {now_ms, then for each schedule ten elements: name, expr, tz,
--          type, payload, max_attempts, catch_up, next_ms (-1 while
--          paused), readable (1, or 0 when its definition cannot be read:
--          the rest are then ''), paused_since_ms (-1: not paused)}
-- Paused schedules come last (see the prelude's SCHED_PAUSED).
local now = now_ms()
local within = arg_int(1, 'within_ms', -1, MAX_AHEAD_MS)
local limit = arg_int(2, 'limit', 1, 10000)
local only = ARGV[3]
if only and not (is_plain(only, 128) and not find(only, '@')) then
  arg_bad('name', only, "a schedule name (1..128 printable bytes, no spaces, no '@')")
end
if arg_fault then return arg_refusal('sched_list') end

local z
if only then
  local s = redis.call('ZSCORE', KEYS[8], only)
  z = s and { only, s } or {}
elseif within < 0 then
  z = redis.call('ZRANGE', KEYS[8], 0, limit - 1, 'WITHSCORES')
else
  z = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now + within, 'WITHSCORES',
                 'LIMIT', 0, limit)
end
local out = { now }
for i = 1, #z, 2 do
  local name, raw = z[i], redis.call('HGET', KEYS[7], z[i])
  local d = nil
  if raw and sub(raw, 1, 2) == '1:' then
    local ok, v = pcall(cmsgpack.unpack, sub(raw, 3))
    if ok and type(v) == 'table' and type(v[1]) == 'string' and type(v[2]) == 'string'
       and type(v[3]) == 'string' and type(v[4]) == 'string' and is_int(v[5])
       and type(v[6]) == 'string' then
      d = v
    end
  end
  local next_ms, since = tonumber(z[i + 1]), -1
  if next_ms == SCHED_PAUSED then
    next_ms = -1
    since = tonumber(redis.call('HGET', KEYS[7], sched_paused_field(name))) or 0
  end
  if d then
    for _, x in ipairs({ name, d[1], d[2], d[3], d[4], d[5], d[6], next_ms, 1, since }) do
      out[#out + 1] = x
    end
  else
    for _, x in ipairs({ name, '', '', '', '', 0, '', next_ms, 0, since }) do
      out[#out + 1] = x
    end
  end
end
return out
