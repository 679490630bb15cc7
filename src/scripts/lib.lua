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

local match, sub, format, byte, find = string.match, string.sub, string.format,
  string.byte, string.find

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

-- ---- dedupe windows -----------------------------------------------------
-- A job added with a dedupe window (enqueue's unique_for, a producer's id
-- only) keeps its id taken for that long after it finished: acked,
-- cancelled or dropped at its expiry, the record's field is then a
-- tombstone, "U:<finished_ms>:<until_ms>", which enqueue's HSETNX finds
-- taken; a job that died keeps its record in dead, and its window runs
-- from its death when it is purged.  Two keys beside the queue's:
--   P:{Q}:unique        hash  id -> "<created_ms> <window_ms>", for the
--                             live job of that id created at created_ms
--   P:{Q}:unique_until  zset  id scored by its window's end, for each
--                             tombstone, so that the reaper deletes it
-- A queue without windows pays one EXISTS per ack call and per cancel.
local function unique_keys()
  local base = sub(KEYS[5], 1, -5)   -- KEYS[5] is P:{Q}:meta
  return base .. 'unique', base .. 'unique_until'
end

-- A tombstone's finish time and window end, or nil when raw is none.
local function tombstone_of(raw)
  local f, u = match(raw or '', '^U:(%d+):(%d+)$')
  if f then return tonumber(f), tonumber(u) end
  return nil
end

-- The tombstones that jobs `ids` leave as they finish, for those with a
-- window: reads only (their records raws when the caller read them, else
-- they are read here), and nil when none has one.  finished_at(i) is when
-- job i finished (default now).
local function unique_plan(ids, raws, finished_at)
  local uk = unique_keys()
  if #ids == 0 or redis.call('EXISTS', uk) == 0 then return nil end
  local e = redis.call('HMGET', uk, unpack(ids))
  local mine, at = {}, {}
  for i = 1, #ids do
    if e[i] then mine[#mine + 1], at[#at + 1] = ids[i], i end
  end
  if #mine == 0 then return nil end
  local r = {}
  if raws then for k = 1, #mine do r[k] = raws[at[k]] end else r = get_records(mine) end
  local now = now_ms()
  local plan = { gone = mine, ids = {}, recs = {}, zadd = {} }
  for k = 1, #mine do
    local c, w = match(e[at[k]], '^(%-?%d+) (%d+)$')
    local j = c and decode(r[k])
    local f = j and j.created == tonumber(c) and (finished_at and finished_at(at[k]) or now)
    if f and f + tonumber(w) > now then
      local n = #plan.ids + 1
      plan.ids[n] = mine[k]
      plan.recs[n] = format('U:%d:%d', f, f + tonumber(w))
      plan.zadd[2 * n - 1] = format('%d', f + tonumber(w))
      plan.zadd[2 * n] = mine[k]
    end
  end
  return plan
end

-- Write what unique_plan planned (after the caller's own writes).
local function unique_apply(plan)
  if not plan then return end
  local uk, zk = unique_keys()
  if #plan.ids > 0 then
    set_records(plan.ids, plan.recs)
    redis.call('ZADD', zk, unpack(plan.zadd))
  end
  redis.call('HDEL', uk, unpack(plan.gone))
end

-- Delete the tombstones whose window ended by `now` (at most `limit`).
local function unique_sweep(now, limit)
  local _, zk = unique_keys()
  local ids = redis.call('ZRANGE', zk, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids == 0 then return end
  local raws = get_records(ids)
  local over = {}
  for i = 1, #ids do
    local _, u = tombstone_of(raws[i])
    if u and u <= now then over[#over + 1] = ids[i] end
  end
  if #over > 0 then del_records(over) end
  redis.call('ZREM', zk, unpack(ids))
end

-- ---- debounce: a job's next run -----------------------------------------
-- A debounced add (enqueue's debounce_ms) of a job that is running cannot
-- change it: it is kept as the job's next run, in
--   P:{Q}:next  hash  id -> "<created_ms> <first_ms> <record>": the record
--                     of the next run (created at first_ms, its first
--                     add; due as the last add said), for the job of that
--                     id created at created_ms
-- When that job's attempt ends (acked, failed, dead, its lease expired),
-- the next run takes its place: the record, due at its own time or at
-- once if that has passed, in its level's delayed set; a retry or a death
-- of the old payload gives way to the newer one.  A queue without
-- debounced adds pays nothing more than the EXISTS that ack shares with
-- the dedupe windows.
local function next_key()
  return sub(KEYS[5], 1, -5) .. 'next'   -- KEYS[5] is P:{Q}:meta
end

-- The next runs that take the place of jobs `ids` as their attempts end
-- (their records raws when the caller read them): reads only; nil when
-- none has one.  plan.took[id] is true for each job that gives way.
local function next_plan(ids, raws)
  local nk = next_key()
  if #ids == 0 or redis.call('EXISTS', nk) == 0 then return nil end
  local v = redis.call('HMGET', nk, unpack(ids))
  local mine, at = {}, {}
  for i = 1, #ids do
    if v[i] then mine[#mine + 1], at[#at + 1] = ids[i], i end
  end
  if #mine == 0 then return nil end
  local r = {}
  if raws then for k = 1, #mine do r[k] = raws[at[k]] end else r = get_records(mine) end
  local now = now_ms()
  local plan = { gone = mine, ids = {}, recs = {}, adds = {}, took = {}, soonest = nil }
  for k = 1, #mine do
    local c, rec = match(v[at[k]], '^(%-?%d+) %d+ (.*)$')
    local old = c and decode(r[k])
    local j = old and old.created == tonumber(c) and decode(rec)
    if j then
      if j.due < now then j.due = now end
      local n = #plan.ids + 1
      plan.ids[n], plan.recs[n] = mine[k], encode(j)
      add_to(plan.adds, j.prio, format('%d', j.due), mine[k])
      plan.took[mine[k]] = true
      if plan.soonest == nil or j.due < plan.soonest then plan.soonest = j.due end
    end
  end
  if plan.soonest then plan.before = head_due_all() end
  return plan
end

-- Write what next_plan planned, after the caller's own writes (which leave
-- the jobs that give way out of every set).
local function next_apply(plan)
  if not plan then return end
  if #plan.ids > 0 then
    set_records(plan.ids, plan.recs)
    delayed_add(plan.adds)
    wake_if_sooner(sub(KEYS[5], 1, -5) .. 'wake', plan.before, plan.soonest)
  end
  redis.call('HDEL', next_key(), unpack(plan.gone))
end

-- ---- expiry ------------------------------------------------------------
-- A job may carry an expiry (enqueue's expire_at): when it has not
-- started by then, it is not run.  Its record does not change (older
-- readers read it as before): two keys beside the queue's, with its hash
-- tag, hold the expiries, and cost a queue that has none one ZRANGE per
-- claim and per reap.
--   P:{Q}:expire_at    zset  id scored by expiry time (ms)
--   P:{Q}:expire_info  hash  id -> "<expire_ms> <created_ms> <dead|drop>"
-- An entry belongs to the job of that id created at created_ms: a job
-- that finished (acked, cancelled, dead) leaves its entry behind, and the
-- entry is dropped when its time comes and it finds no such job waiting.
local function expiry_keys()
  local base = sub(KEYS[5], 1, -5)   -- KEYS[5] is P:{Q}:meta
  return base .. 'expire_at', base .. 'expire_info'
end

-- An expire_info value: the expiry, the job's created_ms and the mode, or
-- nil when it is not one.
local function expiry_parse(v)
  local e, c, mode = match(v or '', '^(%d+) (%-?%d+) (%a+)$')
  if e then return tonumber(e), tonumber(c), mode end
  return nil
end

-- Whether `ex` may be the expiry of a job due at `due`: after it, and at
-- most 200 years from now (a due time up to 100 years ahead, then a ttl
-- of up to 100 years).
local function expiry_fits(ex, due, now)
  return ex and ex > due and ex <= now + 2 * MAX_AHEAD_MS
end

-- Take the entries of jobs `ids` away (a requeue: an operator's "run it").
local function expiry_clear(ids)
  local zk, hk = expiry_keys()
  redis.call('ZREM', zk, unpack(ids))
  redis.call('HDEL', hk, unpack(ids))
end

-- Give job `id` (created at `created`) an expiry, or take its entry away
-- when expire is nil.
local function expiry_set(id, expire, created, mode)
  local zk, hk = expiry_keys()
  if expire then
    redis.call('ZADD', zk, format('%d', expire), id)
    redis.call('HSET', hk, id, format('%d %d %s', expire, created, mode))
  else
    redis.call('ZREM', zk, id)
    redis.call('HDEL', hk, id)
  end
end

-- The expiry of job `id` created at `created`: its time and what happens
-- then ('dead' or 'drop'), or nil when it has none.
local function expiry_of(id, created)
  local _, hk = expiry_keys()
  local e, c, mode = expiry_parse(redis.call('HGET', hk, id))
  if e and c == created then return e, mode end
  return nil
end

-- Jobs past their expiry that have not started (waiting in a delayed
-- set, first or for a retry) leave it: to dead with the error 'expired',
-- attempts unchanged, or deleted (mode drop); meta's `jobs_expired` counts
-- both.  A job running then keeps its entry, moved to its lease deadline
-- (a second on, when that has passed: the reaper has yet to act), and
-- back to its own time by expiry_rearm should the job return to a delayed
-- set: the retry is not run.  At most `limit` entries a call.  Returns
-- how many jobs expired, and whether entries past their time may be left
-- (limit reached).  Reads everything before its first write, and is a
-- whole step: claim and reap call it first, and read for their own work
-- after it (should such a read fail, what it did stands).
local function expire_due(now, limit)
  local zk, hk = expiry_keys()
  local ids = redis.call('ZRANGE', zk, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  local n = #ids
  local expired = 0
  if n > 0 then
    local info = redis.call('HMGET', hk, unpack(ids))
    local raws = get_records(ids)
    local gone, moves, bury, drop, recs = {}, {}, {}, {}, {}
    local drop_raws = {}
    local out = {}   -- per delayed set, the ids that leave it
    for i = 1, n do
      local id = ids[i]
      local _, c, mode = expiry_parse(info[i])
      local j = c and decode(raws[i])
      local key = j and j.created == c and delayed_find(id)
      if key then
        local o = out[key]
        if not o then o = {}; out[key] = o end
        o[#o + 1] = id
        if mode == 'drop' then
          drop[#drop + 1] = id
          drop_raws[#drop_raws + 1] = raws[i]
        else
          j.err = 'expired'
          bury[#bury + 1] = id
          recs[#recs + 1] = encode(j)
        end
        gone[#gone + 1] = id
      else
        local deadline = j and j.created == c and redis.call('ZSCORE', KEYS[3], id)
        if deadline then
          -- At its deadline, or in a second when that has passed (the
          -- reaper has yet to give the job back): not at once again.
          deadline = tonumber(deadline)
          moves[#moves + 1] = format('%d', deadline > now and deadline + 1 or now + 1000)
          moves[#moves + 1] = id
        else
          gone[#gone + 1] = id
        end
      end
    end
    -- A dropped job with a dedupe window leaves its tombstone.
    local tombs = unique_plan(drop, drop_raws)
    if #bury > 0 then set_records(bury, recs) end
    if #drop > 0 then del_records(drop) end
    unique_apply(tombs)
    for key, o in pairs(out) do redis.call('ZREM', key, unpack(o)) end
    if #bury > 0 then
      local z = {}
      for i = 1, #bury do z[2 * i - 1] = now; z[2 * i] = bury[i] end
      redis.call('ZADD', KEYS[4], unpack(z))
    end
    if #moves > 0 then redis.call('ZADD', zk, unpack(moves)) end
    if #gone > 0 then
      redis.call('ZREM', zk, unpack(gone))
      redis.call('HDEL', hk, unpack(gone))
    end
    expired = #bury + #drop
    if expired > 0 then redis.call('HINCRBY', KEYS[5], 'jobs_expired', expired) end
  end
  return expired, n == limit
end

-- Jobs going back to a delayed set (a retry, a release) whose expiry
-- expire_due moved to their lease deadline while they ran: their entries
-- are due again at their own time, so that the claim that would start
-- them ends them first when it has passed.  expiry_again reads (the ZADD
-- arguments for ids and their decoded jobs), expiry_rearm writes them.
local function expiry_again(ids, jobs)
  local _, hk = expiry_keys()
  local info = redis.call('HMGET', hk, unpack(ids))
  local args = {}
  for i = 1, #ids do
    local e, c = expiry_parse(info[i])
    if e and jobs[i] and c == jobs[i].created then
      args[#args + 1] = format('%d', e)
      args[#args + 1] = ids[i]
    end
  end
  return args
end

local function expiry_rearm(args)
  if #args > 0 then redis.call('ZADD', (expiry_keys()), unpack(args)) end
end

-- Put held jobs (ids, with their records raws, read before any write)
-- back in the queue without counting an attempt: out of processing and the
-- lease hash, into delayed at the due time their record keeps, so each
-- runs next, on another worker.  A record that cannot be read goes to dead
-- (nothing could run it); a missing one is dropped and counted (see
-- note_orphans).  Wakes sleeping workers.  release and recover share it.
local function give_back(channel, held, raws)
  local before = head_due_all()
  local now = now_ms()
  local zadd, bury, orphans, soonest = {}, {}, {}, nil
  local jobs = {}
  for i = 1, #held do jobs[i] = decode(raws[i]) or false end
  local rearm = expiry_again(held, jobs)
  for i = 1, #held do
    local j = jobs[i]
    if j then
      add_to(zadd, j.prio, j.due, held[i])
      if soonest == nil or j.due < soonest then soonest = j.due end
    elseif raws[i] then
      bury[#bury + 1] = now
      bury[#bury + 1] = held[i]
    else
      orphans[#orphans + 1] = held[i]
    end
  end
  redis.call('ZREM', KEYS[3], unpack(held))
  redis.call('HDEL', KEYS[6], unpack(held))
  if soonest then
    delayed_add(zadd)
    expiry_rearm(rearm)
    wake_if_sooner(channel, before, soonest)
  end
  if #bury > 0 then redis.call('ZADD', KEYS[4], unpack(bury)) end
  note_orphans(orphans, 3)
end

-- ---- schedules (KEYS[7] schedules, KEYS[8] schedule_due) ---------------
-- A paused schedule (sched_pause) keeps its definition, its score in
-- schedule_due at SCHED_PAUSED (no tick is ever that late, so no daemon
-- fires it, and it still counts among the queue's schedules) and, in the
-- field NAME@paused, the Unix ms it was paused at.
local SCHED_PAUSED = 9007199254740991
local function sched_paused_field(name) return name .. '@paused' end

-- The jobs schedule `name` fired ahead of their ticks and that still wait
-- for them at `now`, as {id, tick, id, tick, ...}: sched_fire lists them,
-- as "ID TICK" pairs separated by spaces, in the field NAME@ of the
-- schedules hash (no schedule's name has an '@'), and sched_remove and
-- sched_pause delete them.  A job no longer due at its own tick has run
-- (a retry waits for its backoff) or was rescheduled: it is not the
-- schedule's to take back.
local function fired_ahead(name, now)
  local out = {}
  local list = redis.call('HGET', KEYS[7], name .. '@') or ''
  for id, tick in string.gmatch(list, '(%S+) (%d+)') do
    local due = redis.call('ZSCORE', KEYS[2], id)
    if due and due == tick and tonumber(tick) > now then
      out[#out + 1] = id
      out[#out + 1] = tick
    end
  end
  return out
end

-- Delete the jobs schedule `name` fired ahead of ticks not yet due (see
-- fired_ahead), and their list: sched_remove and sched_pause.
local function take_back_ahead(name, now)
  local ahead, ids = fired_ahead(name, now), {}
  for i = 1, #ahead, 2 do ids[#ids + 1] = ahead[i] end
  if #ids > 0 then
    del_records(ids)
    redis.call('ZREM', KEYS[2], unpack(ids))
  end
  redis.call('HDEL', KEYS[7], name .. '@')
end
