-- delayq script prelude: prepended to every script at build time.
--
-- Every queue script receives the same five keys, all in the queue's hash
-- slot ({queue}), so a script touches exactly one Redis Cluster slot:
--   KEYS[1] jobs        hash   id -> packed job record
--   KEYS[2] delayed     zset   id scored by due time (ms)
--   KEYS[3] processing  zset   id scored by lease deadline (ms)
--   KEYS[4] dead        zset   id scored by time of death (ms)
--   KEYS[5] meta        hash   counters: seq (generated ids), fence
--
-- A record is a MessagePack array whose first element is the record format.
-- Bump RECORD_FORMAT (and docs/protocol.md) on any incompatible change.
local RECORD_FORMAT = 1

-- Milliseconds on the Redis server's clock: every due time, lease deadline
-- and backoff is measured against it, never against a client's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Decode a packed record; nil when it is missing or unreadable, so that one
-- corrupt record cannot make a whole claim or reap fail.
local function decode(raw)
  if not raw then return nil end
  local ok, r = pcall(cmsgpack.unpack, raw)
  if not ok or type(r) ~= 'table' or r[1] ~= RECORD_FORMAT then return nil end
  return { type = r[2], payload = r[3], attempts = r[4], max = r[5],
           created = r[6], due = r[7], fence = r[8], err = r[9] }
end

local function encode(j)
  return cmsgpack.pack({ RECORD_FORMAT, j.type, j.payload, j.attempts, j.max,
                         j.created, j.due, j.fence, j.err })
end

-- Due time of the earliest delayed job, or nil when none is delayed.
local function head_due(delayed)
  local h = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) end
  return nil
end

-- Tell sleeping workers (subscribed to the queue's wake channel) that a job
-- is now due sooner than the head they are sleeping towards.
local function wake_if_sooner(channel, before, due)
  if channel ~= '' and (before == nil or due < before) then
    redis.call('PUBLISH', channel, due)
  end
end

-- Park-Miller generator: math.random is reseeded identically for every
-- script call, so jitter comes from a seed the caller passes in.  Products
-- stay below 2^53, so Lua's doubles compute it exactly.
local function make_rng(seed)
  local s = (tonumber(seed) or 1) % 2147483647
  if s <= 0 then s = s + 2147483646 end
  return function()
    s = (s * 16807) % 2147483647
    return s / 2147483647
  end
end

-- Exponential backoff before retry number `attempts`: base * 2^(attempts-1),
-- capped, then shortened by up to `jitter` (0..1) so that jobs that failed
-- together do not all come back at the same instant.
local function backoff_ms(attempts, base, cap, jitter, rng)
  local d = base * 2 ^ (attempts - 1)
  if d > cap then d = cap end
  return math.floor(d * (1 - jitter * rng()))
end

-- Attempts allowed for a job: its own limit when the producer set one,
-- otherwise the consumer's default for its type.
local function attempts_allowed(j, default_max)
  if j.max and j.max > 0 then return j.max end
  return default_max
end

-- Move a job whose attempt failed to the dead set or back to delayed.
-- Returns 'dead' or 'retry' and the time it was filed at.
local function retry_or_bury(keys, id, j, now, allowed, force_dead, delay)
  if force_dead or j.attempts >= allowed then
    redis.call('ZADD', keys[4], now, id)
    return 'dead', now
  end
  j.due = now + delay
  redis.call('ZADD', keys[2], j.due, id)
  return 'retry', j.due
end
