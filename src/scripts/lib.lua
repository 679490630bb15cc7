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
-- A record (format 2) is "2:<attempts>:<fence>:" followed by a MessagePack
-- array {type, payload, max_attempts, created_ms, due_ms, last_error}.  The
-- two fields a claim changes and an ack checks stand in plain text before
-- the array, so that the hot path never decodes or re-encodes MessagePack.
-- The fence is 0 except while the job is in processing: claim sets it, and
-- every script that takes a job out of processing writes 0 back, so that
-- ack can trust a matching fence without reading the processing set.
-- Bump the format (and docs/protocol.md) on any incompatible change.

-- The processing set always holds this member, scored above any deadline.
-- Its length (over zset-max-listpack-value, 64 by default) keeps the set
-- in skiplist encoding: a set of up to 128 small members is otherwise a
-- listpack, where each ZADD and ZREM of a member scans the whole list,
-- and workers' batches (2 workers x 64 jobs) sit right at that size.
-- The space keeps it from ever being a job id.
local PIN = 'delayq processing-set pin: keeps this sorted set in skiplist encoding (never a job)'
local PIN_SCORE = '9007199254740991'

-- Milliseconds on the Redis server's clock: every due time, lease deadline
-- and backoff is measured against it, never against a client's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The plain-text head of a record: attempts and fence (numbers) and where
-- the MessagePack body starts; nil when the record is missing or not
-- format 2.
local function split(raw)
  if not raw then return nil end
  local a, f, body = string.match(raw, '^2:(%d+):(%d+):()')
  if not a then return nil end
  return tonumber(a), tonumber(f), body
end

-- The same record with new attempts and fence, its body untouched.
local function restamp(raw, body, attempts, fence)
  return string.format('2:%d:%d:', attempts, fence) .. string.sub(raw, body)
end

-- Decode a whole record; nil when it is missing or unreadable, so that one
-- corrupt record cannot make a whole claim or reap fail.
local function decode(raw)
  local attempts, fence, body = split(raw)
  if not attempts then return nil end
  local ok, r = pcall(cmsgpack.unpack, string.sub(raw, body))
  if not ok or type(r) ~= 'table' then return nil end
  return { attempts = attempts, fence = fence, type = r[1], payload = r[2],
           max = r[3], created = r[4], due = r[5], err = r[6] }
end

local function encode(j)
  return string.format('2:%d:%d:', j.attempts, j.fence)
         .. cmsgpack.pack({ j.type, j.payload, j.max, j.created, j.due, j.err })
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
