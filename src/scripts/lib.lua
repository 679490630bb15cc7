-- delayq script prelude: prepended to every script at build time (with
-- its second part, lib_lifecycle.lua: dedupe windows, debounce, expiries,
-- giving back, schedules).
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

-- The string functions under short names, one a line: a script whose
-- common call comes before "-- prelude: here" makes at the top only those
-- it names there (each costs a call two table reads).
local find = string.find
local format = string.format
local sub = string.sub
local match = string.match
local byte = string.byte

-- How far ahead a due time may be: 100 years of 365 days, in ms.  Further
-- is a mistake (a unit mixed up, an overflow) that would park a job for
-- ever; libdelayq and the command line refuse the same (DQ_MAX_AHEAD_MS).
local MAX_AHEAD_MS = 3153600000000
-- The most attempts a limit may name (an int in C), and the largest whole
-- number a double holds exactly.
local MAX_ATTEMPTS = 2147483647
local MAX_EXACT = 9007199254740991
-- The priority of a job whose record does not name one (0 most urgent).
local NORMAL = 5

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

-- Run a command on a record key, where a key of the wrong type (someone
-- wrote a string over a bucket) must not make the whole script fail: the
-- reply, or nil after logging the key once.  Any other error (a cluster
-- slot on the move) is raised as it is; callers read before they write,
-- so it changes nothing.  pcall costs what call costs: this is per key,
-- never per job.
local function record_cmd(cmd, k, ...)
  local r = redis.pcall(cmd, k, ...)
  if type(r) == 'table' and r.err then
    if not match(r.err, '^WRONGTYPE') then error(r) end
    redis.log(redis.LOG_WARNING, 'delayq: ' .. k .. ' is not a hash: ' .. cmd
              .. ' skipped, the records of its jobs are unreadable')
    return nil
  end
  return r
end

-- The records of ids, in their order (false where missing, '' where the
-- record key is not a hash: an unreadable record, which every script
-- moves to dead): one HMGET per bucket.
local function get_records(ids)
  local order, by = group_by_record_key(ids)
  local raws = {}
  for _, k in ipairs(order) do
    local g = by[k]
    local r = record_cmd('HMGET', k, unpack(g.ids))
    if r then
      for j = 1, #g.at do raws[g.at[j]] = r[j] end
    else
      for j = 1, #g.at do raws[g.at[j]] = '' end
    end
  end
  return raws
end

-- Store records: recs[i] for ids[i]; one HSET per bucket.  Only records
-- that were read (get_records) are written, so a key of the wrong type
-- is never written to.
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

-- Delete records; a key of the wrong type holds none of them.
local function del_records(ids)
  local order, by = group_by_record_key(ids)
  for _, k in ipairs(order) do record_cmd('HDEL', k, unpack(by[k].ids)) end
end

-- One record: as get_records (false where missing, '' where its key is not
-- a hash).
local function get_record(id)
  local k = record_key(id)
  local r = record_cmd('HGET', k, id)
  if r == nil then return '' end
  return r
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
-- MessagePack body starts; nil when the record is missing or not format 3
-- (or counts more attempts than any limit allows).
local function split(raw)
  if not raw then return nil end
  local a, body = match(raw, '^3:(%d+):()')
  if not a or #a > 10 then return nil end
  a = tonumber(a)
  if a > MAX_ATTEMPTS then return nil end
  return a, body
end

-- The same record with new attempts, its body untouched.
local function restamp(raw, body, attempts)
  return format('3:%d:', attempts) .. sub(raw, body)
end

-- A whole number that doubles hold exactly: not NaN, not infinite, not a
-- fraction.
local function is_int(n)
  return type(n) == 'number' and n == math.floor(n)
         and n >= -MAX_EXACT and n <= MAX_EXACT
end

-- The value of a pcall(cmsgpack.unpack, s): the one object s holds, or
-- nil when it failed (truncated, not MessagePack) or s holds more than one
-- (cmsgpack returns each object of a concatenation).
local function one_value(ok, v, ...)
  if ok and select('#', ...) == 0 then return v end
  return nil
end

-- Why the fields of a record body cannot be used, or nil when they can.
local function body_fault(t, p, m, c, o, e)
  if type(t) ~= 'string' then return 'type is not a string' end
  if type(p) ~= 'string' then return 'payload is not a string' end
  if not is_int(m) or m < 0 or m > MAX_ATTEMPTS then
    return 'max_attempts is not a whole number in 0..' .. MAX_ATTEMPTS
  end
  if not is_int(c) then return 'created_ms is not a whole number' end
  if not is_int(o) or not is_int(c + o) then return 'due offset is not a whole number' end
  if e ~= nil and type(e) ~= 'string' then return 'last_error is not a string' end
  return nil
end

-- Read a record, strictly: the job, or nil, why it is unreadable and what
-- could be read of it anyway (fields of the right type, for show and
-- dead_list).  This is the one check of a record's fields: every script
-- that relies on one reads the record with it before its first write, so
-- that a corrupt record is set aside, never found by an error half-way
-- through a script (Redis keeps the writes made before an error).
local function read_record(raw)
  if not raw then return nil, 'missing', {} end
  local attempts, body = split(raw)
  if not attempts then
    if raw == '' then return nil, 'empty, or its key is not a hash', {} end
    return nil, 'no format-3 head', {}
  end
  -- 0x96: a MessagePack array of exactly six; a map (even one keyed 1..6)
  -- or an array of another length is not a record body.
  -- 0x97: seven, the seventh the priority (written only when not normal).
  local h = byte(raw, body)
  if h ~= 0x96 and h ~= 0x97 then
    return nil, 'body is not a MessagePack array of 6 or 7', { attempts = attempts }
  end
  local r = one_value(pcall(cmsgpack.unpack, sub(raw, body)))
  if type(r) ~= 'table' then
    return nil, 'body is truncated or not one MessagePack value', { attempts = attempts }
  end
  local t, p, m, c, o, e = r[1], r[2], r[3], r[4], r[5], r[6]
  local why = body_fault(t, p, m, c, o, e)
  local prio = NORMAL
  if h == 0x97 then
    prio = r[7]
    if not why and not (is_int(prio) and prio >= 0 and prio <= 9) then
      why = 'priority is not a whole number in 0..9'
    end
  end
  if why then
    local part = { attempts = attempts }
    if type(t) == 'string' then part.type = t end
    if type(p) == 'string' then part.payload = p end
    if type(e) == 'string' then part.err = e end
    return nil, why, part
  end
  return { attempts = attempts, type = t, payload = p, max = m, created = c,
           due = c + o, err = e or '', prio = prio }
end

-- The job of a record, or nil when it is missing or unreadable.
local function decode(raw)
  return (read_record(raw))
end

-- ---- checking arguments -------------------------------------------------
-- Every script checks all of its ARGV before its first write.  The first
-- bad argument becomes the script's error reply, one line naming it
-- ("ERR delayq: claim: lease_ms \"0\" is not a whole number in 1..N"), and
-- nothing is written: scripts are called by other languages too.
local arg_fault = nil   -- the first bad argument, described

-- An argument as it can go into one line: printable, at most 40 bytes.
local function shown(s)
  if s == nil then return '(missing)' end
  return '"' .. string.gsub(sub(s, 1, 40), '[^ -~]', '?') .. '"'
end

local function arg_bad(name, s, want)
  if not arg_fault then arg_fault = name .. ' ' .. shown(s) .. ' is not ' .. want end
end

-- The error reply of a script whose arguments did not pass.
local function arg_refusal(script)
  return redis.error_reply('ERR delayq: ' .. script .. ': ' .. arg_fault)
end

-- ARGV[i] as a whole number in lo..hi: decimal digits with an optional
-- minus, never the NaN, infinity, fraction or hex that tonumber takes.
local function arg_int(i, name, lo, hi)
  local s = ARGV[i]
  local n = s and #s <= 17 and match(s, '^%-?%d+$') and tonumber(s)
  if n and n >= lo and n <= hi then return n end
  arg_bad(name, s, format('a whole number in %d..%d', lo, hi))
  return lo
end

-- ARGV[i] as a number in lo..hi (NaN fails every comparison).
local function arg_num(i, name, lo, hi)
  local n = tonumber(ARGV[i] or '')
  if n and n >= lo and n <= hi then return n end
  arg_bad(name, ARGV[i], format('a number in %g..%g', lo, hi))
  return lo
end

local function arg_one_of(i, name, a, b)
  local s = ARGV[i]
  if s == a or s == b then return s end
  arg_bad(name, s, "'" .. a .. "' or '" .. b .. "'")
  return a
end

-- Names (types, ids) are 1..max bytes of printable ASCII without spaces.
local function is_plain(s, max)
  return s ~= '' and #s <= max and not find(s, '[^!-~]')
end

-- ARGV[i] as a job id ('' too when may_be_empty).  The pin (see above)
-- has spaces, so it never passes.
local function arg_id(i, name, may_be_empty)
  local s = ARGV[i]
  if s and ((may_be_empty and s == '') or is_plain(s, 256)) then return s end
  arg_bad(name, s, 'a job id (1..256 printable bytes, no spaces)')
  return ''
end

-- ARGV[i] as a string, whatever it holds.
local function arg_str(i, name)
  if ARGV[i] then return ARGV[i] end
  arg_bad(name, nil, 'given')
  return ''
end

-- The common retry policy arguments (fail and reap): base_ms, cap_ms,
-- jitter and seed from ARGV[i..i+3].
local function arg_policy(i)
  return { base = arg_int(i, 'backoff_base_ms', 0, MAX_AHEAD_MS),
           cap = arg_int(i + 1, 'backoff_cap_ms', 0, MAX_AHEAD_MS),
           jitter = arg_num(i + 2, 'jitter', 0, 1),
           seed = arg_int(i + 3, 'seed', -MAX_EXACT, MAX_EXACT) }
end

-- Members of KEYS[set] whose record is missing: the caller drops them
-- from the set.  Say so in the server log (the first few) and count them
-- in meta's orphans_removed, which fsck and the metrics read.  Cold:
-- orphans are rare, and this costs nothing when there are none.
local function note_orphans(orphans, set)
  local n = #orphans
  if n == 0 then return end
  for i = 1, math.min(n, 10) do
    redis.log(redis.LOG_WARNING, 'delayq: ' .. KEYS[set] .. ': job ' .. orphans[i]
              .. ' has no record: removed')
  end
  if n > 10 then
    redis.log(redis.LOG_WARNING, 'delayq: ' .. KEYS[set] .. ': ' .. (n - 10)
              .. ' more jobs without a record removed')
  end
  redis.call('HINCRBY', KEYS[5], 'orphans_removed', n)
end

-- The dead jobs a requeue or a purge works on: `id` alone when it is dead
-- (nil when it is not), else the oldest `batch` of the dead set KEYS[4].
local function dead_pick(id, batch)
  if id ~= '' then
    if not redis.call('ZSCORE', KEYS[4], id) then return nil end
    return { id }
  end
  return redis.call('ZRANGE', KEYS[4], 0, batch - 1)
end

-- A record: the priority is a seventh element only when it is not normal,
-- so that normal jobs keep the six-element body older readers know.
local function encode(j)
  local t = { j.type, j.payload, j.max, j.created, j.due - j.created, j.err }
  if j.prio and j.prio ~= NORMAL then t[7] = j.prio end
  return format('3:%d:', j.attempts) .. cmsgpack.pack(t)
end

-- Due time of the earliest job of one delayed set, or nil when it is empty.
local function head_due(delayed)
  local h = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) end
  return nil
end

-- ---- priority levels ----------------------------------------------------
-- A job's priority is a level 0..9, 0 the most urgent.  Each level has its
-- own delayed set: normal (5) is KEYS[2], as before priorities existed, so
-- existing data and producers work unchanged; level P is KEYS[2]:P.  Like
-- the buckets, these keys carry the queue's hash tag (same Redis Cluster
-- slot) and are not among the declared keys.  meta's field `levels` lists
-- the other levels that may hold jobs, as digits in order ("09"): it is
-- set before a job goes into such a level, and claim drops a level from it
-- when it finds the level's set empty; absent when only normal is used, so
-- such a claim costs one HGET more than before priorities.
local function level_key(p)
  if p == NORMAL then return KEYS[2] end
  return KEYS[2] .. ':' .. p
end

local levels_read = nil   -- meta's levels, read once per call
local function levels_field()
  if levels_read == nil then levels_read = redis.call('HGET', KEYS[5], 'levels') or '' end
  return levels_read
end

-- The levels to look at, most urgent first: normal and those in `levels`.
local function levels_in_use()
  local out, normal_done = {}, false
  for d in string.gmatch(levels_field(), '%d') do
    local p = tonumber(d)
    if p > NORMAL and not normal_done then
      out[#out + 1] = NORMAL
      normal_done = true
    end
    if p ~= NORMAL then out[#out + 1] = p end
  end
  if not normal_done then out[#out + 1] = NORMAL end
  return out
end

-- Record that level p holds jobs; call it before the first write into it.
local function note_level(p)
  if p == NORMAL then return end
  local s = levels_field()
  local d = tostring(p)
  if find(s, d, 1, true) then return end
  local t = {}
  for c in string.gmatch(s .. d, '%d') do t[#t + 1] = c end
  table.sort(t)
  levels_read = table.concat(t)
  redis.call('HSET', KEYS[5], 'levels', levels_read)
end

-- Rewrite `levels` without the levels of `gone` (found empty by a claim).
local function drop_levels(gone)
  if #gone == 0 then return end
  local s = levels_field()
  for _, p in ipairs(gone) do s = string.gsub(s, tostring(p), '') end
  levels_read = s
  if s == '' then redis.call('HDEL', KEYS[5], 'levels')
  else redis.call('HSET', KEYS[5], 'levels', s) end
end

-- Due time of the earliest delayed job at any level, or nil when none is
-- delayed: what a sleeping worker waits for.
local function head_due_all()
  local soonest = nil
  for _, p in ipairs(levels_in_use()) do
    local h = head_due(level_key(p))
    if h and (soonest == nil or h < soonest) then soonest = h end
  end
  return soonest
end

-- The delayed set that holds id and its due time, or nil.
local function delayed_find(id)
  for _, p in ipairs(levels_in_use()) do
    local s = redis.call('ZSCORE', level_key(p), id)
    if s then return level_key(p), s end
  end
  return nil
end

-- Put jobs into delayed: adds[p] is a ZADD argument list (score, id, ...)
-- for level p.  Levels first, then the sets.
local function delayed_add(adds)
  for p, args in pairs(adds) do
    if #args > 0 then note_level(p) end
  end
  for p, args in pairs(adds) do
    if #args > 0 then redis.call('ZADD', level_key(p), unpack(args)) end
  end
end

-- Append score and id to adds[p] (see delayed_add).
local function add_to(adds, p, score, id)
  local a = adds[p]
  if not a then a = {}; adds[p] = a end
  a[#a + 1] = score
  a[#a + 1] = id
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
  -- Not "d > cap": many attempts make d infinite, or NaN with a base of 0.
  if not (d <= cap) then d = cap end
  return math.floor(d * (1 - jitter * rng()))
end

-- Attempts allowed for a job: its own limit when the producer set one,
-- otherwise the consumer's default for its type.
local function attempts_allowed(j, default_max)
  if j.max and j.max > 0 then return j.max end
  return default_max
end

-- Whether a job whose attempt failed is dead or retried, and the time it
-- is filed at (its time of death, or its new due time, set in j.due).
-- Decides only: the caller writes, after every check.
local function retry_or_bury(j, now, allowed, force_dead, delay)
  if force_dead or j.attempts >= allowed then return 'dead', now end
  j.due = now + delay
  return 'retry', j.due
end
