-- delayq script prelude: prepended to every script at build time.
--
-- Every queue script receives the same six keys, all in the queue's hash
-- slot ({queue}), so a script touches exactly one Redis Cluster slot:
--   KEYS[1] jobs        hash   id -> packed job record, for producers' ids;
--                              records of decimal ids live in buckets
--                              (record_key below)
--   KEYS[2] delayed     zset   id scored by due time (ms)
--   KEYS[3] processing  zset   id scored by lease deadline (ms)
--   KEYS[4] dead        zset   id scored by time of death (ms)
--   KEYS[5] meta        hash   counters: seq (generated ids), fence
--   KEYS[6] lease       hash   id -> fence, for each job in processing
--
-- A record (format 3) is "3:<attempts>:" followed by a MessagePack array
-- {type, payload, max_attempts, created_ms, due_ms - created_ms,
-- last_error}.  attempts counts the attempts that ended (failed or
-- expired); the one in progress is attempts + 1.  A claim reads a record
-- and never writes it: the claim's fence goes to the lease hash.  Bump the
-- format (and docs/protocol.md) on any incompatible change.

local match, sub, format = string.match, string.sub, string.format

-- The processing set always holds this member, scored above any deadline,
-- and the lease hash this field.  Their length (over the listpack limits
-- zset-max-listpack-value and hash-max-listpack-value, 64 by default)
-- keeps both in their hash-table encodings: a sorted set or hash of up to
-- 128 small members is otherwise a listpack, where each write of a member
-- scans the whole list, and workers' batches (2 workers x 64 jobs) sit
-- right at that size.  The spaces keep it from ever being a job id.
local PIN = 'delayq pin: keeps this key in its hash-table encoding (never a job)'
local PIN_SCORE = '9007199254740991'

-- Bucket keys are not among a script's declared keys (a claim cannot know
-- them in advance); they carry the queue's hash tag, so Redis Cluster has
-- them in the declared keys' slot.  While that slot migrates, touching a
-- bucket the node no longer has is an error, so every script reads its
-- buckets before it writes anything: an error then changes nothing.
--
-- Where the record of job `id` is.  Decimal ids (every generated id) go
-- to a bucket of at most 100: the hash jobs:<id without its last two
-- digits>, which Redis keeps as a listpack while its records are small
-- (up to hash-max-listpack-value, 64 bytes): about 70 bytes per job where
-- a field of one big hash costs 140.  Producers' own ids stay in KEYS[1].
local function record_key(id)
  if match(id, '^%d+$') then return KEYS[1] .. ':' .. sub(id, 1, -3) end
  return KEYS[1]
end

-- ids grouped by record key: the keys in first-seen order, and for each
-- its ids and their positions in ids.
local function group_by_record_key(ids)
  local order, by = {}, {}
  for i = 1, #ids do
    local k = record_key(ids[i])
    local g = by[k]
    if not g then
      g = { ids = {}, at = {} }
      by[k] = g
      order[#order + 1] = k
    end
    local n = #g.ids + 1
    g.ids[n] = ids[i]
    g.at[n] = i
  end
  return order, by
end

-- The records of ids, in their order (false where missing): one HMGET
-- per bucket.
local function get_records(ids)
  local order, by = group_by_record_key(ids)
  local raws = {}
  for _, k in ipairs(order) do
    local g = by[k]
    local r = redis.call('HMGET', k, unpack(g.ids))
    for j = 1, #g.at do raws[g.at[j]] = r[j] end
  end
  return raws
end

-- Store records: recs[i] for ids[i]; one HSET per bucket.
local function set_records(ids, recs)
  local order, by = group_by_record_key(ids)
  for _, k in ipairs(order) do
    local g, args = by[k], {}
    for j = 1, #g.at do
      args[2 * j - 1] = g.ids[j]
      args[2 * j] = recs[g.at[j]]
    end
    redis.call('HSET', k, unpack(args))
  end
end

local function del_records(ids)
  local order, by = group_by_record_key(ids)
  for _, k in ipairs(order) do redis.call('HDEL', k, unpack(by[k].ids)) end
end

local function get_record(id)
  return redis.call('HGET', record_key(id), id)
end

local function set_record(id, raw)
  redis.call('HSET', record_key(id), id, raw)
end

-- Milliseconds on the Redis server's clock: every due time, lease deadline
-- and backoff is measured against it, never against a client's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The plain-text head of a record: attempts (a number) and where the
-- MessagePack body starts; nil when the record is missing or not format 3.
local function split(raw)
  if not raw then return nil end
  local a, body = match(raw, '^3:(%d+):()')
  if not a then return nil end
  return tonumber(a), body
end

-- The same record with new attempts, its body untouched.
local function restamp(raw, body, attempts)
  return format('3:%d:', attempts) .. sub(raw, body)
end

-- Decode a whole record; nil when it is missing or unreadable, so that one
-- corrupt record cannot make a whole claim or reap fail.
local function decode(raw)
  local attempts, body = split(raw)
  if not attempts then return nil end
  local ok, r = pcall(cmsgpack.unpack, sub(raw, body))
  if not ok or type(r) ~= 'table' or type(r[4]) ~= 'number'
     or type(r[5]) ~= 'number' then
    return nil
  end
  return { attempts = attempts, type = r[1], payload = r[2], max = r[3],
           created = r[4], due = r[4] + r[5], err = r[6] }
end

local function encode(j)
  return format('3:%d:', j.attempts)
         .. cmsgpack.pack({ j.type, j.payload, j.max, j.created,
                            j.due - j.created, j.err })
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

-- Put held jobs (ids, with their records raws) back in the queue without
-- counting an attempt: out of processing and the lease hash, into delayed
-- at the due time their record keeps (now, for a record that cannot be
-- read: the claim that meets it buries it).  Wakes sleeping workers.
local function give_back(channel, held, raws)
  redis.call('ZREM', KEYS[3], unpack(held))
  redis.call('HDEL', KEYS[6], unpack(held))
  local zadd, soonest = {}, nil
  for i = 1, #held do
    local j = decode(raws[i])
    local due = j and j.due or now_ms()
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = held[i]
    if soonest == nil or due < soonest then soonest = due end
  end
  local before = head_due(KEYS[2])
  redis.call('ZADD', KEYS[2], unpack(zadd))
  wake_if_sooner(channel, before, soonest)
end
