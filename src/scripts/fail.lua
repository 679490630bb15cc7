-- fail: record a failed attempt; retry the job later or bury it as dead.
-- ARGV: wake_channel, id, fence, error, mode ('retry' | 'dead'),
--       retry_delay_ms (-1 = backoff), backoff_base_ms, backoff_cap_ms,
--       jitter (0..1), seed, default_max_attempts
-- Returns {status, at_ms}: 'retry' with the new due time, 'dead' with the
-- time of death, or 'stale' (0) when the job is not held under that fence.
local id = ARGV[2]
if redis.call('HGET', KEYS[6], id) ~= ARGV[3] then return { 'stale', 0 } end
local raw = get_record(id)
redis.call('ZREM', KEYS[3], id)
redis.call('HDEL', KEYS[6], id)

local now = now_ms()
local j = decode(raw)
if not j then
  -- The head is readable but the body is not (claim buries a record
  -- without a head): nothing can run it, so it is buried as it is, for an
  -- operator, with its attempt counted.
  local attempts, body = split(raw)
  if attempts then set_record(id, restamp(raw, body, attempts + 1)) end
  redis.call('ZADD', KEYS[4], now, id)
  return { 'dead', now }
end
j.attempts = j.attempts + 1
local delay = tonumber(ARGV[6])
if delay < 0 then
  delay = backoff_ms(j.attempts, tonumber(ARGV[7]), tonumber(ARGV[8]),
                     tonumber(ARGV[9]), make_rng(ARGV[10]))
end
j.err = ARGV[4]
local before = head_due(KEYS[2])
local status, at = retry_or_bury(KEYS, id, j, now,
  attempts_allowed(j, tonumber(ARGV[11])), ARGV[5] == 'dead', delay)
set_record(id, encode(j))
if status == 'retry' then wake_if_sooner(ARGV[1], before, at) end
return { status, at }
