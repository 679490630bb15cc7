-- enqueue: create a job record and schedule it.
-- ARGV: wake_channel, id ('' = generate), type, payload, when ('delay'|'at'),
--       ms (delay, or absolute Unix ms for 'at'), max_attempts (0 = the
--       consumer's default), replace ('1' = reschedule an existing job),
--       optional priority (0..9, 0 the most urgent; absent = 5, normal),
--       then, for a partitioned queue, partitions N (1..256) and this
--       partition p (0..N-1): a generated id is then seq * N + p, so that
--       its number mod N names its partition (absent: N = 1, the id is seq),
--       then optional expire ('' = none; a Unix time in ms, or "+" and ms
--       after the due time: a job not started by then is not run, see the
--       prelude's expire_due) and on_expire ('dead', the default, or
--       'drop'), then optional unique_for ('' = none; ms: the id stays
--       taken that long after the job finished, a producer's id only; see
--       the prelude's dedupe windows) and unique_ok ('1': an add within a
--       window answers 'done' rather than 'unique'), then optional
--       debounce_ms ('' = none; a producer's id only, with when 'delay'
--       and ms the same debounce_ms, no replace, expire or window) and
--       max_wait_ms ('' = none): see "debounced adds" below
-- Returns {status, id, due_ms, now_ms}; status is 'ok', 'replaced',
-- 'exists' (id taken and replace not asked) or 'running' (a job with this
-- id is being processed: it cannot be replaced under its worker); or
-- {'unique' | 'done', id, finished_ms, now_ms, until_ms} when a job of
-- this id finished within its dedupe window (nothing is written; 'done'
-- when unique_ok).  A debounced add also answers 'debounced' (the waiting
-- job took the add) or 'queued' (the job runs: the add is its next run),
-- with the due time.  {'partitions', stored, 0, now_ms}: the queue's
-- partition count is no longer the caller's N (the count's epoch, below):
-- nothing is written; read the count again and call again.
-- A delay is 0..100 years, an absolute time 0..now + 100 years; any other
-- argument error is refused before anything is written.
--
-- This is a producer's hot path, and costs what its commands cost plus
-- little (docs/benchmarks.md, "The producer's path"): the common call (a
-- new job of normal priority, with or without an expiry, a dedupe window
-- or a debounce, its arguments in their usual spelling) is checked by the
-- plain tests right below and written before the line where the
-- prelude's functions are made, so it makes none of them.  The record is
-- packed from the arguments in one call, and a new id's record is written
-- with HSETNX, which is also the check that the id is free.  Every other
-- call (a bad argument, another priority, an id that is taken, a bucket
-- of the wrong type) goes on below that line,
-- where the prelude's checks name what is wrong; the common call has
-- written nothing by then.
local t = redis.call('TIME')
local us = t[2] + 0
local now = t[1] * 1000 + (us - us % 1000) / 1000
-- (ARGV and KEYS are globals: a local costs one read where each use of
-- a global costs a lookup.)
local argv, keys = ARGV, KEYS
local channel, id, jtype, payload = argv[1], argv[2], argv[3], argv[4]
local when, ms, max = argv[5], argv[6], argv[7]
local nparts, part = 1, 0
local due, score

-- The common call: every test here accepts only what the prelude's checks
-- below accept too, so a call that passes them needs no other.  The
-- patterns are anchored (one pass over the text; an unanchored search
-- tries a match at every byte): a producer's id is printable, and not
-- all digits when it has a byte that is none (ids of digits and dots go
-- below); a number's digits become the number by arithmetic (tonumber is
-- a global and a call).
local replace = argv[8]
local expire, on_expire, window, debounce_ms, max_wait_ms
if payload and #argv <= 17 and (replace == '0' or replace == '1')
   and (argv[9] == nil or argv[9] == '5')
   and (id == '' or (id and #id <= 256 and find(id, '^%d*[!-/:-~][!-~]*$')
                     and id ~= '.' and id ~= '..'))
   and jtype and #jtype <= 128 and jtype ~= '*' and find(jtype, '^[!-~]+$')
   and (max == '0' or max and #max <= 10 and find(max, '^%d+$'))
   and ms and #ms <= 16 and find(ms, '^%d+$') then
  max = max == '0' and 0 or max + 0
  -- The score as ZADD will read it: the argument itself when it is the
  -- due time (a number's conversion to text costs more than a command).
  if when == 'at' then
    due, score = ms + 0, ms
    if due > now + MAX_AHEAD_MS then due = nil end
  elseif when == 'delay' then
    due = ms + 0
    if due > MAX_AHEAD_MS then due = nil else due = now + due end
  end
  if max > MAX_ATTEMPTS then due = nil end
  local n, i = argv[10], argv[11]
  if n then
    nparts = i and #n <= 3 and #i <= 3 and find(n, '^%d+$') and find(i, '^%d+$')
             and tonumber(n)
    part = nparts and tonumber(i)
    if not (nparts and nparts >= 1 and nparts <= 256 and part < nparts) then due = nil end
  end
  -- An expiry, a dedupe window or a debounce (arguments 12 to 17, each ''
  -- or absent when not asked for), as the checks below take them.  (The
  -- string library's functions by their full names: only these calls
  -- look them up.)
  if due and #argv > 11 then
    local ex, oe, w, ok = argv[12], argv[13], argv[14], argv[15]
    local db, mw = argv[16], argv[17]
    if ex ~= '' then
      local plus, digits = string.match(ex, '^(%+?)(%d+)$')
      expire = digits and #digits <= 16 and digits + 0
      if expire and plus == '+' then expire = due + expire end
      if not (expire and expire > due and expire <= now + 2 * MAX_AHEAD_MS) then due = nil end
    end
    on_expire = oe or 'dead'
    if on_expire ~= 'dead' and on_expire ~= 'drop' then due = nil end
    if w and w ~= '' then
      window = #w <= 16 and find(w, '^%d+$') and w + 0
      if not (window and window >= 1 and window <= MAX_AHEAD_MS and id ~= '') then
        due = nil
      end
    end
    if ok and ok ~= '0' and ok ~= '1' then due = nil end
    if db and db ~= '' then
      debounce_ms = #db <= 16 and find(db, '^%d+$') and db + 0
      -- A debounced add of an id with no job is a new job; one whose job
      -- waits at the normal level takes its place (after the HSETNX).
      if not (debounce_ms and debounce_ms >= 1 and debounce_ms <= MAX_AHEAD_MS and id ~= ''
              and when == 'delay' and ms == db and replace == '0' and not expire
              and not window) then
        due = nil
      end
    end
    if mw and mw ~= '' then
      max_wait_ms = debounce_ms and #mw <= 16 and find(mw, '^%d+$') and mw + 0
      if not (max_wait_ms and max_wait_ms >= 1 and max_wait_ms <= MAX_AHEAD_MS) then
        due = nil
      end
    end
  end
  -- The count this partition's meta holds, if any, must be the caller's
  -- (see "The count's epoch" below).
  local stored = due and redis.call('HGET', keys[5], 'partitions')
  if stored and (nparts == 1 or tonumber(stored) ~= nparts) then due = nil end
end

if due and debounce_ms then
  -- A debounced add of a job that waits (not running) at the normal
  -- level, with a record show's common call reads: the add's type,
  -- payload and limit take its place, due at now + debounce_ms but never
  -- later than its first add + max_wait_ms, its attempts, created time and
  -- last error kept, and any next run it was left dropped: byte for byte
  -- what the path below writes ("Debounced adds").  An id with no record
  -- is a new job (below); any other goes to the path below the prelude.
  -- (Looked for before a new job's record is made: a debounced id that
  -- is waiting is the call this exists for.)
  local raw = redis.pcall('HGET', keys[1], id)
  if raw then
    due = nil
    local a, body = string.match(type(raw) == 'string' and raw or '', '^3:(%d+):()\150')
    if a and #a <= 10 and not redis.call('ZSCORE', keys[3], id)
       and redis.call('ZSCORE', keys[2], id) then
      local type = type
      local ok, left, jt, p, m, c, o, e = pcall(cmsgpack.unpack_limit, raw, 6, body)
      if ok and left == -1 and type(jt) == 'string' and type(p) == 'string'
         and type(e) == 'string' and a + 0 <= MAX_ATTEMPTS
         and type(m) == 'number' and m % 1 == 0 and m >= 0 and m <= MAX_ATTEMPTS
         and type(c) == 'number' and c % 1 == 0 and c >= -MAX_EXACT and c <= MAX_EXACT
         and type(o) == 'number' and o % 1 == 0 and c + o >= -MAX_EXACT
         and c + o <= MAX_EXACT then
        local d = now + debounce_ms
        if max_wait_ms and c + max_wait_ms < d then d = c + max_wait_ms end
        -- The new record: its head (the attempts, as the prelude writes
        -- them, and \150), then as the record below is made, with c in
        -- place of now and the old error after the offset; one struct.pack
        -- of a constant format when cmsgpack would pick the widths those
        -- formats write (c takes 9 bytes from 2^32 on), else
        -- cmsgpack.pack.  (The choice of format
        -- is written out twice: a function shared by both paths is made
        -- on every call, which costs every plain add 700 instructions;
        -- docs/benchmarks.md, fifth round.)
        local off, tl, pl, el, rec = d - c, #jtype, #payload, #e, nil
        if tl < 32 and pl < 256 and max < 128 and el < 32 and c >= 4294967296
           and off >= 0 and off < 4294967296 then
          local short, ph = pl < 32, 0xa0 + pl
          if not short then ph = 0xd900 + pl end
          local oh, fmt = off, short and 'c0Bc0Bc0BB>I8BBc0' or 'c0Bc0>Hc0BBI8BBc0'
          if off > 127 then
            if off < 256 then
              oh, fmt = 0xcc00 + off, short and 'c0Bc0Bc0BB>I8HBc0' or 'c0Bc0>Hc0BBI8HBc0'
            elseif off < 65536 then
              oh, fmt = 0xcd0000 + off, short and 'c0Bc0Bc0BB>I8I3Bc0' or 'c0Bc0>Hc0BBI8I3Bc0'
            else
              oh, fmt = 0xce00000000 + off, short and 'c0Bc0Bc0BB>I8I5Bc0'
                                              or 'c0Bc0>Hc0BBI8I5Bc0'
            end
          end
          -- (The head as stored, but for attempts written with leading
          -- zeros, which the prelude writes without.)
          local head = #a > 1 and string.byte(a) == 48 and string.format('3:%d:\150', a)
                       or string.sub(raw, 1, body)
          rec = struct.pack(fmt, head, 0xa0 + tl, jtype, ph, payload, max, 0xcf, c, oh,
                            0xa0 + el, e)
        else
          rec = string.format('3:%d:\150', a) .. cmsgpack.pack(jtype, payload, max, c, off, e)
        end
        redis.call('HSET', keys[1], id, rec)
        local score = string.format('%d', d)
        redis.call('ZADD', keys[2], score, id)
        redis.call('HDEL', string.sub(keys[5], 1, -5) .. 'next', id)
        if channel ~= '' and redis.call('ZRANGE', keys[2], '0', '0')[1] == id then
          redis.call('PUBLISH', channel, score)
        end
        return { 'debounced', id, d, now }
      end
    end
  end
end

if due then
  -- The record, byte for byte as the prelude's encode writes it (six
  -- elements, the last an empty error, \160: the priority is normal).
  -- The usual record (a type under 32 bytes, a payload under 256, a limit
  -- under 128, a due time not past and under 49 days ahead) is one
  -- struct.pack, whose
  -- format is one of eight constants: each MessagePack head is a number of
  -- the width cmsgpack picks (fixstr \160 + length, or str8 \217 and the
  -- length, as a big-endian H; the offset in 1, 2 (\204), 3 (\205) or 5
  -- (\206) bytes; created in 9, \207).  cmsgpack.pack makes a string of
  -- each value before it joins them, which cost a third of the call;
  -- struct copies a string byte by byte, so a longer payload goes there.
  local tl, pl, off = #jtype, #payload, due - now
  local rec
  if tl < 32 and pl < 256 and max < 128 and off >= 0 and off < 4294967296 then
    local short, ph = pl < 32, 0xa0 + pl
    if not short then ph = 0xd900 + pl end
    local oh, fmt = off, short and 'c0Bc0Bc0BB>I8BB' or 'c0Bc0>Hc0BBI8BB'
    if off > 127 then
      if off < 256 then
        oh, fmt = 0xcc00 + off, short and 'c0Bc0Bc0BB>I8HB' or 'c0Bc0>Hc0BBI8HB'
      elseif off < 65536 then
        oh, fmt = 0xcd0000 + off, short and 'c0Bc0Bc0BB>I8I3B' or 'c0Bc0>Hc0BBI8I3B'
      else
        oh, fmt = 0xce00000000 + off, short and 'c0Bc0Bc0BB>I8I5B' or 'c0Bc0>Hc0BBI8I5B'
      end
    end
    rec = struct.pack(fmt, '3:0:\150', 0xa0 + tl, jtype, ph, payload, max, 0xcf, now, oh, 0xa0)
  else
    rec = '3:0:\150' .. cmsgpack.pack(jtype, payload, max, now, off) .. '\160'
  end
  -- HSETNX replies 1 when it wrote the record, 0 when the id has one, and
  -- an error (as a table) when the key is not a hash: then the id is left
  -- to the path below.
  local written
  if id == '' then
    -- Generated ids are decimal (producers' own ids may not be all
    -- digits), their records in buckets of 100 (the prelude's record_key).
    repeat
      id = string.format('%d', redis.call('HINCRBY', keys[5], 'seq', '1') * nparts + part)
      written = redis.pcall('HSETNX', keys[1] .. ':' .. string.sub(id, 1, -3), id, rec)
    until written ~= 0
  else
    written = redis.pcall('HSETNX', keys[1], id, rec)
  end
  if written == 1 then
    -- Wake sleeping workers when the job is now the head of its level,
    -- as below.  (Every number given to a command here is a string: Redis
    -- prints a Lua number with snprintf, which costs what the ZRANGE does.)
    redis.call('ZADD', keys[2], score or string.format('%d', due), id)
    -- As the prelude's expiry_set and the window's entry below.
    if expire or window then
      local base = string.sub(keys[5], 1, -5)
      if expire then
        redis.call('ZADD', base .. 'expire_at', string.format('%d', expire), id)
        redis.call('HSET', base .. 'expire_info', id,
                   string.format('%d %d %s', expire, now, on_expire))
      end
      if window then
        redis.call('HSET', base .. 'unique', id, string.format('%d %d', now, window))
      end
    end
    if channel ~= '' and redis.call('ZRANGE', keys[2], '0', '0')[1] == id then
      redis.call('PUBLISH', channel, due)
    end
    return { 'ok', id, due, now }
  end
end

-- prelude: here
-- Any other call.  The prelude's checks: the first bad argument, named.
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
local prio = NORMAL
nparts, part = 1, 0
if ARGV[9] then prio = arg_int(9, 'priority', 0, 9) end
if ARGV[10] then
  nparts = arg_int(10, 'partitions', 1, 256)
  part = arg_int(11, 'partition', 0, nparts - 1)
end
expire, on_expire = nil, 'dead'
if ARGV[12] and ARGV[12] ~= '' then
  local plus, ms12 = match(ARGV[12], '^(%+?)(%d+)$')
  expire = ms12 and #ms12 <= 16 and tonumber(ms12)
  if expire and plus == '+' then expire = due + expire end
  if not expiry_fits(expire, due, now) then
    arg_bad('expire', ARGV[12], 'a Unix time in ms after the due time (' .. due
            .. '), or + and ms after it')
  end
end
if ARGV[13] then on_expire = arg_one_of(13, 'on_expire', 'dead', 'drop') end
local unique_for = nil
if ARGV[14] and ARGV[14] ~= '' then
  unique_for = arg_int(14, 'unique_for', 1, MAX_AHEAD_MS)
  if id == '' then arg_bad('unique_for', ARGV[14], 'given with a generated id (give an id)') end
end
local unique_ok = ARGV[15] and arg_one_of(15, 'unique_ok', '0', '1') == '1'
local debounce, max_wait = nil, nil
if ARGV[16] and ARGV[16] ~= '' then
  debounce = arg_int(16, 'debounce_ms', 1, MAX_AHEAD_MS)
  if id == '' then arg_bad('debounce_ms', ARGV[16], 'given with a generated id (give an id)')
  elseif when ~= 'delay' or ARGV[6] ~= ARGV[16] then
    arg_bad('debounce_ms', ARGV[16], 'given with when "delay" and the same ms')
  elseif replace == '1' or expire or unique_for then
    arg_bad('debounce_ms', ARGV[16], 'given alone (not with replace, an expiry or a window)')
  end
  if ARGV[17] and ARGV[17] ~= '' then max_wait = arg_int(17, 'max_wait_ms', 1, MAX_AHEAD_MS) end
elseif ARGV[17] and ARGV[17] ~= '' then
  arg_bad('max_wait_ms', ARGV[17], 'given without debounce_ms')
end
if #ARGV > 17 then arg_bad('argument 18', ARGV[18], 'expected: enqueue takes at most 17') end
if arg_fault then return arg_refusal('enqueue') end

-- The count's epoch: the meta of the keys written holds the queue's
-- partition count when it is not the caller's (the unpartitioned meta
-- once the queue has more than 1; each partition's after a change, see
-- docs/protocol.md, "Partitioned queues").  A caller that read an older
-- count is told the stored one, before anything is written, and reads it
-- again.
local stored = redis.call('HGET', KEYS[5], 'partitions')
if stored and (nparts == 1 or tonumber(stored) ~= nparts) then
  return { 'partitions', stored, 0, now }
end

local rec = encode({ type = jtype, payload = payload, attempts = 0, max = max,
                     created = now, due = due, err = '', prio = prio })

-- HSETNX on a record key: 1 when the record was written, 0 when the id
-- has one.  A key of the wrong type holds no record that can be read:
-- record_cmd logs it, and the id counts as taken.
local function put_new(key, job)
  return record_cmd('HSETNX', key, job, rec) or 0
end

local status = 'ok'
local set = level_key(prio)

-- Debounced adds.  While the job of this id waits (delayed or due, not
-- claimed), an add takes its place: the add's type, payload, attempts
-- limit and priority, due at now + debounce_ms but never later than its
-- first add (created_ms) + max_wait_ms; attempts and last error kept.
-- (The job keeps its created_ms, and with it any expiry or dedupe window
-- its first add gave it.)  While it runs, the add is kept as its next run
-- (see the prelude), due
-- by the same rule from the first such add, and takes the job's place
-- when its attempt ends.  With no job of this id, it is a new job due at
-- now + debounce_ms (below).  A dead job keeps its id: 'exists'.
if debounce then
  local raw = get_record(id)
  if raw and not tombstone_of(raw) then
    local function cap(first)
      local d = now + debounce
      if max_wait and first + max_wait < d then d = first + max_wait end
      return d
    end
    local job = { type = jtype, payload = payload, attempts = 0, max = max, err = '',
                  prio = prio }
    if redis.call('ZSCORE', KEYS[3], id) then
      local j = decode(raw)
      if not j then return { 'exists', id, 0, now } end
      local old = redis.call('HGET', next_key(), id)
      local oc, of = match(old or '', '^(%-?%d+) (%d+) ')
      job.created = (oc and tonumber(oc) == j.created) and tonumber(of) or now
      job.due = cap(job.created)
      redis.call('HSET', next_key(), id,
                 format('%d %d ', j.created, job.created) .. encode(job))
      return { 'queued', id, job.due, now }
    end
    local key = delayed_find(id)
    local j = key and decode(raw)
    if not j then return { 'exists', id, 0, now } end
    job.created, job.attempts, job.err = j.created, j.attempts, j.err
    job.due = cap(j.created)
    set_record(id, encode(job))
    if key ~= set then redis.call('ZREM', key, id) end
    note_level(prio)
    redis.call('ZADD', set, format('%d', job.due), id)
    -- The waiting job now has the latest payload.  (A waiting job keeps
    -- no next run, since each end of an attempt applies it; one left by an
    -- older script's give-back is older than this add.)
    redis.call('HDEL', next_key(), id)
    if channel ~= '' and redis.call('ZRANGE', set, '0', '0')[1] == id then
      redis.call('PUBLISH', channel, job.due)
    end
    return { 'debounced', id, job.due, now }
  end
end

if id == '' then
  repeat
    id = format('%d', redis.call('HINCRBY', KEYS[5], 'seq', '1') * nparts + part)
  until put_new(record_key(id), id) == 1
elseif put_new(KEYS[1], id) == 0 then
  -- The tombstone of a job that finished within its dedupe window keeps
  -- the id taken; one whose window is over is the id's to take.
  local finished, until_ms, cancelled = tombstone_of(get_record(id))
  if finished and until_ms > now then
    return { unique_ok and 'done' or 'unique', id, finished, now, until_ms,
             cancelled and 'cancelled' or 'done' }
  end
  if finished then
    set_record(id, rec)
    redis.call('ZREM', select(2, unique_keys()), id)
  else
    if replace ~= '1' then return { 'exists', id, 0, now } end
    if redis.call('ZSCORE', KEYS[3], id) then return { 'running', id, 0, now } end
    local was = delayed_find(id)
    set_record(id, rec)
    redis.call('ZREM', KEYS[4], id)
    if was and was ~= set then redis.call('ZREM', was, id) end
    status = 'replaced'
  end
end

-- Wake sleeping workers when the job is now the head of its own level
-- (due no later than any other): that head or a sooner one is what they
-- sleep towards.  Asked after the ZADD by member, not by score: reading a
-- score makes Redis print a double and the script parse it back, which
-- cost more than the command.  (A job due at the same time as the old
-- head and sorted before it wakes them for nothing, as does one when a
-- more urgent level holds a sooner job: a wake that finds nothing due
-- costs a worker one claim; reading every level's head on every enqueue
-- cost each producer more.)
note_level(prio)
redis.call('ZADD', set, format('%d', due), id)
if expire then expiry_set(id, expire, now, on_expire)
elseif status == 'replaced' then expiry_set(id, nil) end
if unique_for then
  redis.call('HSET', (unique_keys()), id, format('%d %d', now, unique_for))
elseif status == 'replaced' then
  redis.call('HDEL', (unique_keys()), id)
end
if channel ~= '' and redis.call('ZRANGE', set, '0', '0')[1] == id then
  redis.call('PUBLISH', channel, due)
end
return { status, id, due, now }
