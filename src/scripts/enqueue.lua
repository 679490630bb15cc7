-- enqueue: create a job record and schedule it.
-- ARGV: wake_channel, id ('' = generate), type, payload, when ('delay'|'at'),
--       ms (delay, or absolute Unix ms for 'at'), max_attempts (0 = the
--       consumer's default), replace ('1' = reschedule an existing job),
--       optional priority (0..9, 0 the most urgent; absent = 5, normal),
--       then, for a partitioned queue, partitions N (1..256) and this
--       partition p (0..N-1): a generated id is then seq * N + p, so that
--       its number mod N names its partition (absent: N = 1, the id is seq)
-- Returns {status, id, due_ms, now_ms}; status is 'ok', 'replaced',
-- 'exists' (id taken and replace not asked) or 'running' (a job with this
-- id is being processed: it cannot be replaced under its worker).
-- A delay is 0..100 years, an absolute time 0..now + 100 years; any other
-- argument error is refused before anything is written.
--
-- This is a producer's hot path, and costs what its commands cost plus
-- little (docs/benchmarks.md, "The producer's path"): the common call is
-- checked by the plain tests right below, and only a call they do not
-- pass (a bad argument, or a good one in an unusual spelling) goes
-- through the prelude's checks, which name what is wrong.  The record is
-- packed from the arguments in one cmsgpack call, and a new id's record
-- is written with HSETNX, which is also the check that the id is free.
-- prelude: on demand
local find, t = string.find, redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local channel, id, jtype, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local when, ms, max, replace = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local prio, nparts, part = NORMAL, 1, 0
local due

-- The common call: every test here accepts only what the prelude's checks
-- below accept too, so a call that passes them needs no other.
if payload and #ARGV <= 11 and (replace == '0' or replace == '1')
   and (id == '' or (id and #id <= 256 and not find(id, '[^!-~]')
                     and not find(id, '^%d+$') and id ~= '.' and id ~= '..'))
   and jtype and jtype ~= '' and #jtype <= 128 and jtype ~= '*' and not find(jtype, '[^!-~]')
   and max and #max <= 10 and find(max, '^%d+$') and ms and #ms <= 16 and find(ms, '^%d+$') then
  max = tonumber(max)
  if when == 'at' then
    due = tonumber(ms)
    if due > now + MAX_AHEAD_MS then due = nil end
  elseif when == 'delay' then
    due = tonumber(ms)
    if due > MAX_AHEAD_MS then due = nil else due = now + due end
  end
  if max > MAX_ATTEMPTS then due = nil end
  local p, n, i = ARGV[9], ARGV[10], ARGV[11]
  if p then
    prio = #p == 1 and find(p, '^%d$') and tonumber(p)
    if not prio then due = nil end
  end
  if n then
    nparts = i and #n <= 3 and #i <= 3 and find(n, '^%d+$') and find(i, '^%d+$')
             and tonumber(n)
    part = nparts and tonumber(i)
    if not (nparts and nparts >= 1 and nparts <= 256 and part < nparts) then due = nil end
  end
end

if not due then
  -- The prelude's checks: the first bad argument, named.
  prelude()
  arg_fault = nil
  channel = arg_str(1, 'wake_channel')
  id = arg_id(2, 'id', true)
  if match(id, '^%d+$') then
    arg_bad('id', id, 'a producer id (all digits are kept for generated ids)')
  elseif id == '.' or id == '..' then
    arg_bad('id', id, "a producer id (not '.' or '..', which URLs cannot name)")
  end
  if not (jtype and is_plain(jtype, 128) and jtype ~= '*') then
    arg_bad('type', jtype, "a job type (1..128 printable bytes, no spaces, not '*')")
  end
  payload = arg_str(4, 'payload')
  when = arg_one_of(5, 'when', 'delay', 'at')
  if when == 'at' then
    due = arg_int(6, 'at_ms', 0, now + MAX_AHEAD_MS)
  else
    due = now + arg_int(6, 'delay_ms', 0, MAX_AHEAD_MS)
  end
  max = arg_int(7, 'max_attempts', 0, MAX_ATTEMPTS)
  replace = arg_one_of(8, 'replace', '0', '1')
  prio, nparts, part = NORMAL, 1, 0
  if ARGV[9] then prio = arg_int(9, 'priority', 0, 9) end
  if ARGV[10] then
    nparts = arg_int(10, 'partitions', 1, 256)
    part = arg_int(11, 'partition', 0, nparts - 1)
  end
  if #ARGV > 11 then arg_bad('argument 12', ARGV[12], 'expected: enqueue takes at most 11') end
  if arg_fault then return arg_refusal('enqueue') end
end

-- The record, as the prelude's encode writes it: the priority is a
-- seventh element only when it is not normal.
local rec
if prio == NORMAL then
  rec = '3:0:\150' .. cmsgpack.pack(jtype, payload, max, now, due - now, '')
else
  rec = '3:0:\151' .. cmsgpack.pack(jtype, payload, max, now, due - now, '', prio)
end

-- HSETNX on a record key: 1 when the record was written, 0 when the id
-- has one.  A key of the wrong type holds no record that can be read: the
-- prelude's record_cmd logs it, and the id counts as taken.
local function put_new(key, job)
  local r = redis.pcall('HSETNX', key, job, rec)
  if type(r) == 'table' then
    prelude()
    r = record_cmd('HSETNX', key, job, rec) or 0
  end
  return r
end

local status = 'ok'
local set = KEYS[2]
if prio ~= NORMAL then
  prelude()
  set = level_key(prio)
end
if id == '' then
  -- Generated ids are decimal (producers' own ids may not be all digits),
  -- their records in buckets of 100 (see the prelude's record_key).
  repeat
    id = string.format('%d', redis.call('HINCRBY', KEYS[5], 'seq', 1) * nparts + part)
  until put_new(KEYS[1] .. ':' .. string.sub(id, 1, -3), id) == 1
elseif put_new(KEYS[1], id) == 0 then
  if replace ~= '1' then return { 'exists', id, 0, now } end
  if redis.call('ZSCORE', KEYS[3], id) then return { 'running', id, 0, now } end
  prelude()
  local was = delayed_find(id)
  set_record(id, rec)
  redis.call('ZREM', KEYS[4], id)
  if was and was ~= set then redis.call('ZREM', was, id) end
  status = 'replaced'
end

-- Wake sleeping workers when the job is due before the head of its own
-- level: that head or a sooner one is what they sleep towards.  (When a
-- more urgent level holds a sooner job, the wake finds nothing due and
-- costs a worker one claim; reading every level's head on every enqueue
-- cost each producer more.)
if prio ~= NORMAL then note_level(prio) end
local head = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')[2]
redis.call('ZADD', set, string.format('%d', due), id)
if channel ~= '' and (head == nil or due < tonumber(head)) then
  redis.call('PUBLISH', channel, due)
end
return { status, id, due, now }
