-- enqueue_many: enqueue's work for several jobs of one queue in one call,
-- with one command per batch rather than per job (libdelayq's dq_enqueue_many).
-- The client sends each record's body already encoded, so that the script
-- only stamps the times on it: this is the bulk producer's hot path.
-- ARGV: wake_channel, then per job three arguments, then, for a
-- partitioned queue, two more: partitions N (1..256) and this partition
-- p (0..N-1), when a generated id is seq * N + p (see enqueue):
--   id    '' = generate one
--   when  a delay in ms ("5000"), or "@" and an absolute Unix time in ms
--         ("@1767225600000"); an "r" in front of either ("r5000") replaces
--         a job of that id that is not running; "/" and a priority
--         0..9 after it ("5000/0") gives the job that priority (0 the
--         most urgent; without one, 5: normal); then ">" and an expiry
--         ("5000>1767225600000", a Unix time in ms; ">+60000", ms after
--         the due time), with "!" after it when the job is then dropped
--         rather than moved to dead (enqueue's expire and on_expire);
--         then "~" and a dedupe window in ms ("~3600000"), with "?" after
--         it when a job within one is answered 'done' (enqueue's
--         unique_for and unique_ok)
--   body  the record body's MessagePack up to its times: an array header
--         of 6, then type, payload and max_attempts.  The script appends
--         created_ms, due_ms - created_ms and an empty last_error (and,
--         for a priority other than normal, makes it an array of 7 and
--         appends the priority).
-- At most MANY_MAX (1000) jobs a call, what every client sends at most:
-- Lua's unpack takes 8000 values, and a ZADD of 4000 jobs would fail after
-- the records were written.
-- Returns {now_ms, seq, then per exception: index, status, id}.  Jobs are
-- 'ok' with the id the client sent, a delay's due time being now_ms + delay,
-- and the k-th job sent without an id (counting from 1) getting seq + k
-- ((seq + k) * N + p in a partitioned queue);
-- the exceptions (1-based index) are the jobs with another status, as
-- enqueue's, or with a generated id drawn again because a producer's
-- record held it.  A short reply: the client knows the rest.  Or
-- {'partitions', stored}: the queue's partition count is no longer the
-- caller's N; nothing is written (see enqueue).
--
-- This is the bulk producer's hot path, and costs what its commands cost
-- plus little (docs/benchmarks.md, "The producer's path"): the common call
-- (new jobs of normal priority, each with a generated id or a producer's
-- id, a delay or an absolute time, and a well-formed body) is checked and
-- laid out in one pass over the jobs and written above the line where the
-- prelude's functions are made.  Every other call (a bad job, a
-- replacement, another priority, an id already taken, a bucket of the
-- wrong type) goes on below that line, where the prelude's checks name
-- what is wrong; the common call has written nothing by then.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local MANY_MAX = 1000

do
  -- (ARGV and KEYS are globals: a local costs one read where each use of
  -- a global costs a lookup.)
  local argv, keys = ARGV, KEYS
  local channel, nargs = argv[1], #argv
  local n, nparts, part = (nargs - 1) / 3, 1, 0
  if nargs > 3 and (nargs - 1) % 3 == 2 then
    n = (nargs - 3) / 3
    local np, pp = argv[nargs - 1], argv[nargs]
    nparts = #np <= 3 and #pp <= 3 and find(np, '^%d+$') and find(pp, '^%d+$')
             and tonumber(np)
    part = nparts and tonumber(pp)
    if not (nparts and nparts >= 1 and nparts <= 256 and part < nparts) then n = 0 end
  end
  if n ~= math.floor(n) or n > MANY_MAX then n = 0 end
  -- One pass: every test accepts only what the checks below accept too.
  -- Per record key (a bucket), its ids (for the HMGET that proves them
  -- free) and its HSET's arguments; the ZADD's arguments; the soonest
  -- job.  A job that does not pass ends the pass early.
  local bkeys, bids, bsets, nb = {}, {}, {}, 0
  local zadd, nz, passed = {}, 0, 0
  local seq, generated = nil, 0
  local tail_created, pack = cmsgpack.pack(now), cmsgpack.pack
  -- Per distinct when: the due time, the score as ZADD reads it, and the
  -- packed due_ms - created_ms.  (A string of digits is turned into a
  -- number by arithmetic, which costs what tonumber does without its call.)
  local last_when, due, score, tail = nil, nil, nil, nil
  local head, head_len = nil, 0   -- the last body head checked: 0x96, the type
  local soonest = nil
  local gen_bucket, gen_key = nil, nil
  local last_key, ids, sets, ni = nil, nil, nil, 0
  local seen = nil                -- producers' ids in this call
  for i = 1, channel and n or 0 do
    local id, when, body = argv[3 * i - 1], argv[3 * i], argv[3 * i + 1]
    -- when: a delay or "@" and a time, in digits (no "r", no priority).
    if when ~= last_when then
      local ms = #when <= 17 and match(when, '^@(%d+)$')
      if ms then
        due, score = ms + 0, ms
        if due > now + MAX_AHEAD_MS then break end
      else
        due = #when <= 16 and find(when, '^%d+$') and when + 0
        if not due or due > MAX_AHEAD_MS then break end
        due = now + due
        score = format('%d', due)
      end
      last_when, tail = when, pack(due - now)
    end
    -- body: 0x96, a type (checked once per head), a payload str, an
    -- unsigned max_attempts below 2^31, and nothing after it.
    if sub(body, 1, head_len) ~= head then
      local a, h, l8 = byte(body, 1, 3)
      local tlen, at = h and h >= 0xa1 and h <= 0xbf and h - 0xa0, 3
      if h == 0xd9 then tlen, at = l8, 4 end
      if a ~= 0x96 or not tlen or tlen < 1 or tlen > 128 then break end
      local ty = sub(body, at, at + tlen - 1)
      if #ty < tlen or ty == '*' or find(ty, '[^!-~]') then break end
      head, head_len = sub(body, 1, at + tlen - 1), at + tlen - 1
    end
    local p = head_len + 1
    local ph, p2, p3 = byte(body, p, p + 2)
    local m
    if ph and ph >= 0xa0 and ph <= 0xbf then
      m = p + 1 + ph - 0xa0
    elseif ph == 0xd9 and p2 then
      m = p + 2 + p2
    elseif ph == 0xda and p3 then
      m = p + 3 + p2 * 256 + p3
    else
      break     -- no str, or one of 64 KiB or more: the checks below
    end
    local mt, m2 = byte(body, m, m + 1)
    local last = (mt and mt <= 0x7f and m) or (mt == 0xcc and m + 1)
                 or (mt == 0xcd and m + 2) or (mt == 0xce and m2 and m2 < 0x80 and m + 4)
    if #body ~= last then break end
    -- id: generated (decimal, in buckets of 100) or a producer's.
    local key
    if id == '' then
      if not seq then
        seq = tonumber(redis.call('HGET', keys[5], 'seq') or '0')
        if not seq or seq < 0 then break end
      end
      generated = generated + 1
      local num = (seq + generated) * nparts + part
      id = format('%d', num)
      if num - num % 100 ~= gen_bucket then
        gen_bucket, gen_key = num - num % 100, keys[1] .. ':' .. sub(id, 1, -3)
      end
      key = gen_key
    else
      if #id > 256 or not find(id, '^%d*[!-/:-~][!-~]*$') or id == '.' or id == '..' then
        break   -- not printable, all digits (or digits and dots): below
      end
      if not seen then seen = {} end
      if seen[id] then break end
      seen[id] = true
      key = keys[1]
    end
    if key ~= last_key then
      local b = nil
      for j = 1, nb do if bkeys[j] == key then b = j end end
      if not b then
        nb = nb + 1
        b = nb
        bkeys[b], bids[b], bsets[b] = key, {}, {}
      end
      last_key, ids, sets, ni = key, bids[b], bsets[b], #bids[b]
    end
    ni = ni + 1
    ids[ni] = id
    sets[2 * ni - 1] = id
    sets[2 * ni] = '3:0:' .. body .. tail_created .. tail .. '\160'
    zadd[nz + 1] = score
    zadd[nz + 2] = id
    nz = nz + 2
    if soonest == nil or due < soonest then soonest = due end
    passed = i
  end
  -- Every id free (a generated id a record holds, a producer's id that
  -- is taken, or a bucket of the wrong type: below), then the writes.
  local free = passed == n and n >= 1
  if free then
    -- The count's epoch (below): a count the meta holds must be ours.
    local stored = redis.call('HGET', keys[5], 'partitions')
    free = not stored or (nparts > 1 and tonumber(stored) == nparts)
  end
  for b = 1, free and nb or 0 do
    local r = redis.pcall('HMGET', bkeys[b], unpack(bids[b]))
    if r.err then free = false break end
    for j = 1, #r do
      if r[j] then free = false break end
    end
    if not free then break end
  end
  if free then
    if generated > 0 then redis.call('HINCRBY', keys[5], 'seq', format('%d', generated)) end
    for b = 1, nb do redis.call('HSET', bkeys[b], unpack(bsets[b])) end
    redis.call('ZADD', keys[2], unpack(zadd))
    -- Wake sleeping workers when the soonest new job is due at the head
    -- of the normal level (by score: which of several jobs due at once
    -- sorts first is Redis's byte order, not Lua's, whose string
    -- comparison follows the server's locale), as enqueue does.
    if channel ~= '' and tonumber(redis.call('ZRANGE', keys[2], '0', '0', 'WITHSCORES')[2])
                         == soonest then
      redis.call('PUBLISH', channel, format('%d', soonest))
    end
    return { now, seq or 0 }
  end
end

-- prelude: here
-- Any other call.  The prelude's checks: the first bad job, named.
local n = (#ARGV - 1) / 3
local nparts, part = 1, 0
if #ARGV > 3 and (#ARGV - 1) % 3 == 2 then
  n = (#ARGV - 3) / 3
  nparts = arg_int(#ARGV - 1, 'partitions', 1, 256)
  part = arg_int(#ARGV, 'partition', 0, nparts - 1)
end
local tonumber, pack = tonumber, cmsgpack.pack

-- The length of the MessagePack str whose header is at b[i], and where
-- its bytes start; nil when there is none.  Not bin (0xc4..0xc6, what
-- msgpack-python writes for bytes by default): Redis 7.0's cmsgpack
-- cannot decode it, so a record holding one could be run by the daemon
-- but not shown, requeued or run now by a script.
local function str_at(b, i)
  local t = byte(b, i)
  if not t then return nil end
  if t >= 0xa0 and t <= 0xbf then return t - 0xa0, i + 1 end
  if t == 0xd9 then
    local l = byte(b, i + 1)
    return l, l and i + 2
  end
  if t == 0xda then
    local h, l = byte(b, i + 1, i + 2)
    return l and h * 256 + l, l and i + 3
  end
  if t == 0xdb then
    local b1, b2, b3, b4 = byte(b, i + 1, i + 4)
    return b4 and ((b1 * 256 + b2) * 256 + b3) * 256 + b4, b4 and i + 5
  end
  return nil
end

-- Why a job's body head (see above) is not one, or nil: an array header
-- of 6, a type (1..128 printable bytes, no spaces, not '*'), a payload and
-- a max_attempts of 0..2^31-1, and nothing else.  Its last type checked
-- is remembered: a bulk producer's jobs mostly share one.
local last_type = nil
local function body_fault_at(b)
  if byte(b, 1) ~= 0x96 then return 'does not start with an array header of 6' end
  local tlen, at = str_at(b, 2)
  if not tlen or tlen < 1 or tlen > 128 then return 'has no type str of 1..128 bytes' end
  local t = sub(b, at, at + tlen - 1)
  if t ~= last_type then
    if #t < tlen or not is_plain(t, 128) or t == '*' then return 'has a bad type' end
    last_type = t
  end
  local plen, pat = str_at(b, at + tlen)
  if not plen then return 'has no payload as a MessagePack str (bin is not one)' end
  local m = pat + plen
  local mt = byte(b, m)
  local mlen = (mt and mt <= 0x7f and 1) or (mt == 0xcc and 2) or (mt == 0xcd and 3)
               or (mt == 0xce and byte(b, m + 1) and byte(b, m + 1) < 0x80 and 5)
  if not mlen then return 'has no max_attempts in 0..2147483647' end
  if #b ~= m + mlen - 1 then return 'is truncated or has bytes after max_attempts' end
  return nil
end

-- Every argument is checked before anything is written: a bad one (any
-- job's) refuses the whole call, naming the job, and the queue is left
-- as it was.
if n < 1 or n ~= math.floor(n) then
  arg_bad('arguments', tostring(#ARGV), 'a wake channel and triples of id, when, body')
  n = 0
elseif n > MANY_MAX then
  arg_bad('arguments', tostring(#ARGV), 'a wake channel and at most ' .. MANY_MAX .. ' jobs')
  n = 0
end
local ids, dues, replace, prios, generated, seq = {}, {}, {}, {}, 0, 0
local expires, modes, uniques, unique_oks = {}, {}, {}, {}
local last_when, last_due, last_replace, last_prio = nil, nil, nil, NORMAL
local last_expire, last_mode, last_unique, last_unique_ok = nil, nil, nil, false
for i = 1, n do
  local id, when, body = ARGV[3 * i - 1], ARGV[3 * i + 0], ARGV[3 * i + 1]
  if when ~= last_when then
    -- A delay of 0..100 years or a time up to now + 100 years, as digits:
    -- never the NaN, infinity or wrapped 64-bit number tonumber takes.
    local r, at, ms, pr = match(when, '^(r?)(@?)(%d+)(.*)$')
    local v = ms and #ms <= 16 and tonumber(ms)
    local ex, plus, ems, drop = nil, nil, nil, nil
    local un, uok = nil, nil
    if pr and pr ~= '' then
      local p2, rest = match(pr, '^/(%d)(.*)$')
      if p2 then pr = p2 else pr, rest = nil, pr end
      local xpart, upart = match(rest, '^([^~]*)(.*)$')
      if xpart ~= '' then
        plus, ems, drop = match(xpart, '^>(%+?)(%d+)(!?)$')
        ex = ems and #ems <= 16 and tonumber(ems)
        if not ex then v = nil end
      end
      if upart ~= '' then
        un, uok = match(upart, '^~(%d+)(.*)$')
        if uok ~= '' and uok ~= '?' then un = nil end
        un = un and #un <= 16 and tonumber(un)
        if not (un and un >= 1 and un <= MAX_AHEAD_MS) then v = nil end
      end
    end
    if v and at == '' and v <= MAX_AHEAD_MS then
      last_due = now + v
    elseif v and at == '@' and v <= now + MAX_AHEAD_MS then
      last_due = v
    else
      arg_bad('job ' .. i .. ' when', when,
              'a delay in 0..' .. MAX_AHEAD_MS .. ' ms or @ and a Unix time in ms up to 100 years ahead'
              .. ', then optionally / and a priority 0..9, > and an expiry, ~ and a window')
      break
    end
    if ex and plus == '+' then ex = last_due + ex end
    if ex and not expiry_fits(ex, last_due, now) then
      arg_bad('job ' .. i .. ' when', when, 'an expiry after the due time (' .. last_due .. ')')
      break
    end
    last_when, last_replace = when, r == 'r'
    last_prio = pr and tonumber(pr) or NORMAL
    last_expire, last_mode = ex, drop == '!' and 'drop' or 'dead'
    last_unique, last_unique_ok = un, uok == '?'
  end
  if id == '' and last_unique then
    arg_bad('job ' .. i .. ' when', when, 'a dedupe window with a generated id (give an id)')
    break
  end
  if id ~= '' and (not is_plain(id, 256) or match(id, '^%d+$') or id == '.' or id == '..') then
    arg_bad('job ' .. i .. ' id', id, "a producer id (1..256 printable bytes, no spaces, not all digits, not '.' or '..')")
    break
  end
  local why = body_fault_at(body)
  if why then
    arg_bad('job ' .. i .. ' body', nil, 'well formed: it ' .. why)
    break
  end
  dues[i] = last_due
  expires[i], modes[i] = last_expire, last_mode
  uniques[i], unique_oks[i] = last_unique, last_unique_ok
  replace[i] = last_replace
  prios[i] = last_prio
  ids[i] = id
  if id == '' then generated = generated + 1 end
end
if arg_fault then return arg_refusal('enqueue_many') end

-- The count's epoch, as enqueue's: the meta of the keys written holds
-- the queue's partition count when it is not the caller's.  The whole
-- call is refused before anything is written; the caller reads the count
-- again and sends the jobs where it says.
do
  local stored = redis.call('HGET', KEYS[5], 'partitions')
  if stored and (nparts == 1 or tonumber(stored) ~= nparts) then
    return { 'partitions', stored }
  end
end

-- Generated ids come from one counter increment for the whole batch.
if generated > 0 then
  seq = redis.call('HINCRBY', KEYS[5], 'seq', generated) - generated
  local next_id = seq
  for i = 1, n do
    if ids[i] == '' then
      next_id = next_id + 1
      ids[i] = format('%d', next_id * nparts + part)
    end
  end
end
local found = get_records(ids)
-- A tombstone within its dedupe window keeps its id taken (see the
-- prelude); one whose window is over frees it.
local taken, windows, ended = {}, {}, {}
for i = 1, n do
  local finished, until_ms = tombstone_of(found[i])
  if finished and until_ms > now then
    windows[ids[i]] = true
  elseif finished then
    ended[#ended + 1] = ids[i]
  elseif found[i] then
    taken[ids[i]] = true
  end
end

local before = head_due_all()
-- created_ms is the same for the whole batch, and many jobs share a due
-- time: encode each once.  Scores go to ZADD as integer strings: a number
-- handed to redis.call is formatted with "%.17g", a cost per job.
local tail_created = pack(now)
local last_due, last_tail, last_score = nil, nil, nil
local out = { now, seq }
local new_ids, recs, zadd, undead, moved = {}, {}, {}, {}, {}
local expiring = {}   -- id, expire, mode, ... (expire false: none)
local uniquing = {}   -- {id, window ms or nil}
local soonest = nil
for i = 1, n do
  local id = ids[i]
  local status = 'ok'
  if windows[id] then
    status = unique_oks[i] and 'done' or 'unique'
  elseif taken[id] then
    if ARGV[3 * i - 1] == '' then
      -- A generated id that a record holds already: draw again.
      repeat
        id = format('%d', redis.call('HINCRBY', KEYS[5], 'seq', 1) * nparts + part)
      until not get_record(id) and not taken[id]
    elseif not replace[i] then
      status = 'exists'
    elseif redis.call('ZSCORE', KEYS[3], id) then
      status = 'running'
    else
      undead[#undead + 1] = id
      -- A replacement at another priority leaves its old level.
      local was = delayed_find(id)
      if was and was ~= level_key(prios[i]) then moved[#moved + 1] = { was, id } end
      status = 'replaced'
    end
  end
  if status == 'ok' or status == 'replaced' then
    local due = dues[i]
    if due ~= last_due then
      last_due, last_tail = due, tail_created .. pack(due - now) .. '\160'
      last_score = format('%d', due)
    end
    local h = #new_ids + 1
    local p = prios[i]
    new_ids[h] = id
    if p == NORMAL then
      recs[h] = '3:0:' .. ARGV[3 * i + 1] .. last_tail
    else
      recs[h] = '3:0:\151' .. sub(ARGV[3 * i + 1], 2) .. last_tail .. pack(p)
    end
    add_to(zadd, p, last_score, id)
    if uniques[i] or status == 'replaced' then
      uniquing[#uniquing + 1] = { id, uniques[i] }
    end
    if expires[i] or status == 'replaced' then
      local e = #expiring
      expiring[e + 1], expiring[e + 2], expiring[e + 3] = id, expires[i] or false, modes[i]
    end
    taken[id] = true
    if soonest == nil or due < soonest then soonest = due end
  end
  if status ~= 'ok' or id ~= ids[i] then
    local o = #out
    out[o + 1] = i
    out[o + 2] = status
    out[o + 3] = id
  end
end
if #new_ids > 0 then
  -- Records first, then the sets: if a bucket cannot be reached (see the
  -- prelude), nothing has changed.
  set_records(new_ids, recs)
  if #undead > 0 then redis.call('ZREM', KEYS[4], unpack(undead)) end
  for _, m in ipairs(moved) do redis.call('ZREM', m[1], m[2]) end
  delayed_add(zadd)
  for e = 1, #expiring, 3 do
    expiry_set(expiring[e], expiring[e + 1] or nil, now, expiring[e + 2])
  end
  local uk, zk = unique_keys()
  for _, u in ipairs(uniquing) do
    if u[2] then redis.call('HSET', uk, u[1], format('%d %d', now, u[2]))
    else redis.call('HDEL', uk, u[1]) end
  end
  if #ended > 0 then redis.call('ZREM', zk, unpack(ended)) end
  wake_if_sooner(ARGV[1], before, soonest)
end
return out
