#!lua flags=no-writes
-- browse: a page of one of the queue's lists, in list order (delayed by
-- due time over every priority level, processing by lease deadline, dead
-- by time of death; oldest first), for an operator's dashboard.
-- ARGV: which ('delayed', 'processing' or 'dead'), offset (0 or more),
--       count (1..200000), type ('' = every type), examine (1..200000: with
--       a type, how many entries from the head of the list are looked at),
--       mode ('records', 'ids', or 'these' followed by ids in ARGV[7..])
-- Returns {now_ms, total, matched, then per entry}: total counts the list
-- (every type); matched the entries of the type found (-1 when the
-- examined entries were not the whole list; total without a type).  Per
-- entry, mode 'records' and 'these' give ten elements: id, at_ms (due
-- time, lease deadline or time of death), type, attempts (processing: the
-- one in progress included), max_attempts, priority (0..9), created_ms,
-- payload_bytes, last_error, unreadable ('' or why the record cannot be
-- read: the other fields are then what could be read, '' or 0); mode
-- 'ids' gives two: id, at_ms.  'these' (ids taken as they are: any member
-- of a set may be asked for) answers for the ids given that are
-- still in the list, in their order (the second step of a merge of
-- partitions: 'ids' first, then 'these' for the entries the merged page
-- holds).  Reads only; an unreadable record never fails the page.
local which = arg_str(1, 'which')
if which ~= 'delayed' and which ~= 'processing' and which ~= 'dead' then
  arg_bad('which', which, "'delayed', 'processing' or 'dead'")
end
local offset = arg_int(2, 'offset', 0, MAX_EXACT)
local count = arg_int(3, 'count', 1, 200000)
local jtype = arg_str(4, 'type')
local examine = arg_int(5, 'examine', 1, 200000)
local mode = arg_str(6, 'mode')
if mode ~= 'records' and mode ~= 'ids' and mode ~= 'these' then
  arg_bad('mode', mode, "'records', 'ids' or 'these'")
end
if arg_fault then return arg_refusal('browse') end

-- The sets of the list, most urgent level first for delayed.
local sets = {}
if which == 'delayed' then
  for _, p in ipairs(levels_in_use()) do sets[#sets + 1] = level_key(p) end
elseif which == 'processing' then
  sets[1] = KEYS[3]
else
  sets[1] = KEYS[4]
end

local total = 0
for _, k in ipairs(sets) do total = total + redis.call('ZCARD', k) end
if which == 'processing' and redis.call('ZSCORE', KEYS[3], PIN) then total = total - 1 end

-- How many entries of the list score below s (every set).
local function count_below(s)
  local n = 0
  for _, k in ipairs(sets) do n = n + redis.call('ZCOUNT', k, '-inf', format('(%d', s)) end
  return n
end

-- The score of entry `at` (1-based) of the list: the least whole score s
-- with more than at - 1 entries at or below it, found by bisection over
-- the sets' scores (due times, deadlines and times of death are whole
-- ms), each step one ZCOUNT per set.  nil past the end.
local function score_at(at)
  local lo, hi = nil, nil
  for _, k in ipairs(sets) do
    local h = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    local t = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
    if h[2] then
      local a, z = tonumber(h[2]), tonumber(t[2])
      if not lo or a < lo then lo = a end
      if not hi or z > hi then hi = z end
    end
  end
  if not lo then return nil end
  if at == 1 then return math.floor(lo) end
  lo, hi = math.floor(lo), math.ceil(hi)
  if count_below(hi + 1) < at then return nil end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if count_below(mid + 1) >= at then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- Entries from..to (1-based, inclusive) of the list, as {id, score}
-- pairs.  One set: a ZRANGE.  Several (the priority levels): find where
-- entry `from` lies by score (score_at), then merge the sets from that
-- score on, the more urgent level first on a tie, so that a deep page
-- costs what a first page does.  The processing set's pin is dropped.
local function window(from, to)
  local out = {}
  if #sets == 1 then
    local z = redis.call('ZRANGE', sets[1], from - 1, to - 1, 'WITHSCORES')
    for i = 1, #z, 2 do
      if z[i] ~= PIN then out[#out + 1] = { z[i], tonumber(z[i + 1]) } end
    end
    return out
  end
  local s = score_at(from)
  if not s then return out end
  local skip = from - 1 - count_below(s)  -- entries at score s before `from`
  local want = skip + to - from + 1
  local heads, at = {}, {}
  for i, k in ipairs(sets) do
    heads[i] = redis.call('ZRANGEBYSCORE', k, s, '+inf', 'WITHSCORES', 'LIMIT', 0, want)
    for j = 2, #heads[i], 2 do heads[i][j] = tonumber(heads[i][j]) end
    at[i] = 1
  end
  local n = 0
  while n < want do
    local best = nil
    for i = 1, #sets do
      local sc = heads[i][at[i] + 1]
      if sc and (best == nil or sc < heads[best][at[best] + 1]) then best = i end
    end
    if not best then break end
    n = n + 1
    if n > skip then out[#out + 1] = { heads[best][at[best]], heads[best][at[best] + 1] } end
    at[best] = at[best] + 2
  end
  return out
end

-- The score of id in the list, or nil.
local function score_of(id)
  if which == 'delayed' then
    local _, s = delayed_find(id)
    return s and tonumber(s)
  end
  local s = redis.call('ZSCORE', sets[1], id)
  return s and tonumber(s)
end

local function records_of(entries)
  local ids = {}
  for i, e in ipairs(entries) do ids[i] = e[1] end
  if #ids == 0 then return {} end
  return get_records(ids)
end

-- Whether a record is of the type asked for.  A type under 32 bytes is a
-- MessagePack fixstr, the same bytes whoever encoded the record: it is
-- compared where the body's first element starts, without unpacking the
-- payload; a longer one (whose length byte encoders choose differently)
-- is read with the record.
local packed_type = #jtype < 32 and cmsgpack.pack(jtype)
local function is_type(raw)
  if packed_type then
    local _, body = split(raw)
    if not body then return false end
    local h = byte(raw, body)
    return (h == 0x96 or h == 0x97) and sub(raw, body + 1, body + #packed_type) == packed_type
  end
  local j, _, part = read_record(raw)
  return (j and j.type or part.type) == jtype
end

local entries, matched = nil, total
if mode == 'these' then
  entries = {}
  for i = 7, #ARGV do
    local s = score_of(ARGV[i])
    if s then entries[#entries + 1] = { ARGV[i], s } end
  end
elseif jtype == '' then
  entries = window(offset + 1, offset + count)
else
  local seen = window(1, examine)
  local raws = records_of(seen)
  local hits = {}
  for i, e in ipairs(seen) do
    if is_type(raws[i]) then hits[#hits + 1] = e end
  end
  matched = #hits
  if #seen < total then matched = -1 end
  entries = {}
  for i = offset + 1, math.min(#hits, offset + count) do entries[#entries + 1] = hits[i] end
end

local out = { now_ms(), total, matched }
if mode == 'ids' then
  for _, e in ipairs(entries) do
    local o = #out
    out[o + 1] = e[1]
    out[o + 2] = e[2]
  end
  return out
end
local raws = records_of(entries)
for i, e in ipairs(entries) do
  local j, why, part = read_record(raws[i])
  j = j or { type = part.type or '', attempts = part.attempts or 0, max = 0,
             prio = NORMAL, created = 0, payload = part.payload or '',
             err = part.err or '' }
  local attempts = j.attempts
  if which == 'processing' then attempts = attempts + 1 end
  for _, x in ipairs({ e[1], e[2], j.type, attempts, j.max, j.prio, j.created,
                       #j.payload, j.err, why or '' }) do
    out[#out + 1] = x
  end
end
return out
