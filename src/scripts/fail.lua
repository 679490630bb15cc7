-- fail: record a failed attempt; retry the job later or bury it as dead.
-- ARGV: wake_channel, id, fence, error, mode ('retry' | 'dead'),
--       retry_delay_ms (-1 = backoff), backoff_base_ms, backoff_cap_ms,
--       jitter (0..1), seed, default_max_attempts
-- Returns {status, at_ms}: 'retry' with the new due time, 'dead' with the
-- time of death, or 'stale' (0) when the job is not held under that fence.
local id = ARGV[2]
if not redis.call('ZSCORE', KEYS[3], id) then return { 'stale', 0 } end
local raw = redis.call('HGET', KEYS[1], id)
local attempts, fence, body = split(raw)
if fence ~= tonumber(ARGV[3]) then return { 'stale', 0 } end

local now = now_ms()
local j = decode(raw)
if not j then
  -- The head is readable but the body is not: nothing can run it, so it
  -- is buried as it is, for an operator.  Its fence goes back to 0, as on
  -- every way out of processing (ack relies on it).
  redis.call('ZREM', KEYS[3], id)
  redis.call('HSET', KEYS[1], id, restamp(raw, body, attempts, 0))
  redis.call('ZADD', KEYS[4], now, id)
  return { 'dead', now }
end
j.fence = 0
local delay = tonumber(ARGV[6])
if delay < 0 then
  delay = backoff_ms(j.attempts, tonumber(ARGV[7]), tonumber(ARGV[8]),
                     tonumber(ARGV[9]), make_rng(ARGV[10]))
end
redis.call('ZREM', KEYS[3], id)
j.err = ARGV[4]
local before = head_due(KEYS[2])
local status, at = retry_or_bury(KEYS, id, j, now,
  attempts_allowed(j, tonumber(ARGV[11])), ARGV[5] == 'dead', delay)
redis.call('HSET', KEYS[1], id, encode(j))
if status == 'retry' then wake_if_sooner(ARGV[1], before, at) end
return { status, at }
