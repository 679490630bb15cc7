-- fsck: one bounded step of a check of the queue's keys against the rule
-- "a job is in exactly one of delayed, processing or dead, and its record
-- is in jobs or a bucket of it"; with 'repair', the same step mends what
-- it found.  The caller loops from cursor '0' until the reply's cursor is
-- '0' again (as with SCAN), so no call holds Redis for long, whatever the
-- queue's size.
-- ARGV: cursor ('0' to start), count (1..1000), 'check' | 'repair'
-- Returns {next_cursor, scanned, records, members, leases, bad_keys,
--          repaired, claim_dropped, then per finding 4 elements:
--          kind, key, id, expected}
-- kind 'record': a record (in key) in none of delayed, processing, dead;
--   repaired: to dead with the last error 'orphan record' (an unreadable
--   record goes to dead as it is);
-- kind 'member': a member of delayed, processing or dead (key) without a
--   record; repaired: removed (from processing with its lease field);
-- kind 'lease': a field of the lease hash without a record (and not of
--   a member of processing: that is the member's finding); repaired:
--   removed;
-- kind 'type': key is not of the type the queue needs: id is the type it
--   has, expected the type it should have.  Never repaired: a key of the
--   wrong type is someone's data, for an operator to look at.
-- claim_dropped is the meta field orphans_removed: ids the claim script
-- dropped because their record was missing.
--
-- Race safety: a finding is judged and repaired inside one call, which
-- Redis runs atomically, so a job that scripts move between sets is never
-- seen in no set; nothing found in one call is acted on in another.
--
-- The pass has phases, each a scan with its own cursor; the cursor names
-- the phase by one letter: j (the jobs hash), b (buckets: SCAN MATCH over
-- the database, the exception to declared keys that docs/protocol.md
-- describes), d, p, x (ZSCAN of delayed, processing, dead), then A..J
-- without F (ZSCAN of the delayed sets of priority levels 0..9 other than
-- normal, whose set is delayed itself), l (HSCAN of the lease hash).  A step only reads until it has judged everything it
-- will write, so an error (a bucket on a migrating slot) changes nothing.
local FSCK_PHASES = { 'j', 'b', 'd', 'p', 'x', 'A', 'B', 'C', 'D', 'E', 'G', 'H',
                      'I', 'J', 'l' }
local FSCK_EXPECT = { 'hash', 'zset', 'zset', 'zset', 'hash', 'hash' }
local FSCK_CHUNK = 1000  -- arguments per command: under Lua's unpack limit

local cursor, count, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local phase, at
if cursor == '0' then
  phase, at = 'j', '0'
elseif type(cursor) == 'string' then
  phase, at = match(cursor, '^([jbdpxlA-EG-J])(%d+)$')
end
if not phase then return redis.error_reply('fsck: bad cursor') end
if not count or count ~= math.floor(count) or count < 1 or count > 1000 then
  return redis.error_reply('fsck: count must be a whole number from 1 to 1000')
end
if mode ~= 'check' and mode ~= 'repair' then
  return redis.error_reply("fsck: mode must be 'check' or 'repair'")
end
local repair = mode == 'repair'
local now = now_ms()

local sums = { scanned = 0, records = 0, members = 0, leases = 0, bad = 0,
               repaired = 0 }
local visited = 0   -- elements the steps of this call read (a bucket: 10)
local found = {}
local function finding(kind, key, id, expected)
  found[#found + 1] = kind
  found[#found + 1] = key
  found[#found + 1] = id
  found[#found + 1] = expected or ''
end

-- A key's type, asked once per call.
local key_types = {}
local function key_type(key)
  local t = key_types[key]
  if not t then
    t = redis.call('TYPE', key).ok
    key_types[key] = t
  end
  return t
end

-- Every call needs the queue's keys readable as their types (a command on
-- a key of another type is an error); the first call reports those that
-- are not.
local usable = {}
for i = 1, 6 do
  local t = key_type(KEYS[i])
  usable[i] = t == 'none' or t == FSCK_EXPECT[i]
  if not usable[i] and cursor == '0' then
    sums.bad = sums.bad + 1
    finding('type', KEYS[i], t, FSCK_EXPECT[i])
  end
end
-- The delayed sets of the other priority levels (see the prelude), all of
-- them whatever meta's levels says, and whether each is readable.
local level_keys, level_usable = {}, true
for p = 0, 9 do
  if p ~= NORMAL then
    local key = level_key(p)
    local t = key_type(key)
    if t == 'zset' then level_keys[#level_keys + 1] = key end
    if t ~= 'none' and t ~= 'zset' then
      level_usable = false
      if cursor == '0' then
        sums.bad = sums.bad + 1
        finding('type', key, t, 'zset')
      end
    end
  end
end
-- Whether a record is in a set can be judged only when all are readable.
local sets_usable = usable[2] and usable[3] and usable[4] and level_usable

-- Does job `id` have a record?  nil when its bucket cannot tell (a key of
-- the wrong type: reported by the bucket phase, never guessed about).
local function has_record(id)
  local k = record_key(id)
  local t = key_type(k)
  if t == 'none' then return false end
  if t ~= 'hash' then return nil end
  return redis.call('HEXISTS', k, id) == 1
end

-- The scores of ids in a sorted set (false where absent), in chunks.
local function zmscore(key, ids)
  local out = {}
  for first = 1, #ids, FSCK_CHUNK do
    local last = math.min(first + FSCK_CHUNK - 1, #ids)
    local r = redis.call('ZMSCORE', key, unpack(ids, first, last))
    for i = 1, #r do out[first + i - 1] = r[i] end
  end
  return out
end

-- The ids among `ids` (records in hash `key`) that are in no set.
local function records_in_no_set(ids)
  local lost = {}
  if #ids == 0 then return lost end
  sums.scanned = sums.scanned + #ids
  local d = zmscore(KEYS[2], ids)
  local p = zmscore(KEYS[3], ids)
  local x = zmscore(KEYS[4], ids)
  local levels = {}
  for i, key in ipairs(level_keys) do levels[i] = zmscore(key, ids) end
  for i = 1, #ids do
    local in_level = false
    for _, l in ipairs(levels) do in_level = in_level or l[i] end
    if not d[i] and not p[i] and not x[i] and not in_level then
      lost[#lost + 1] = ids[i]
    end
  end
  return lost
end

-- Records in no set, as {key, ids} groups: report them, and with repair
-- read them all, then bury them (dead, 'orphan record').
local function bury_records(groups)
  local plans = {}
  for _, g in ipairs(groups) do
    for _, id in ipairs(g.ids) do
      sums.records = sums.records + 1
      finding('record', g.key, id)
    end
    if repair and #g.ids > 0 then
      local raws = redis.call('HMGET', g.key, unpack(g.ids))
      local hset = {}
      for i, id in ipairs(g.ids) do
        local j = decode(raws[i])
        if j then
          j.err = 'orphan record'
          hset[#hset + 1] = id
          hset[#hset + 1] = encode(j)
        end
      end
      plans[#plans + 1] = { key = g.key, ids = g.ids, hset = hset }
    end
  end
  -- Writes only from here on.
  for _, plan in ipairs(plans) do
    if #plan.hset > 0 then redis.call('HSET', plan.key, unpack(plan.hset)) end
    local zadd = {}
    for _, id in ipairs(plan.ids) do
      zadd[#zadd + 1] = now
      zadd[#zadd + 1] = id
    end
    redis.call('ZADD', KEYS[4], unpack(zadd))
    sums.repaired = sums.repaired + #plan.ids
  end
end

-- Fields of a record hash that belong there (a field record_key would
-- not look for in `key` is not judged), and are records: the tombstone of
-- a job that finished within its dedupe window is in no set by design
-- (the reaper deletes it when the window ends; see the prelude).
local function own_fields(key, flat, step)
  local ids = {}
  for i = 1, #flat, step do
    if record_key(flat[i]) == key and not (step == 2 and tombstone_of(flat[i + 1])) then
      ids[#ids + 1] = flat[i]
    end
  end
  return ids
end

-- Each phase runs one step from sub-cursor `c` and returns the next
-- sub-cursor ('0': the phase is done), or nil when it has nothing to scan.
local steps = {}

steps.j = function(c)
  if not sets_usable or not usable[1] then return nil end
  local r = redis.call('HSCAN', KEYS[1], c, 'COUNT', count)
  visited = visited + #r[2] / 2
  local lost = records_in_no_set(own_fields(KEYS[1], r[2], 2))
  bury_records({ { key = KEYS[1], ids = lost } })
  return r[1]
end

-- The SCAN pattern of the queue's buckets: KEYS[1] with glob characters
-- escaped, then ':*'.
local function bucket_pattern()
  return (string.gsub(KEYS[1], '([%*%?%[%]\\])', '\\%1')) .. ':*'
end

steps.b = function(c)
  -- A bucket holds up to 100 records: visit about count / 10 keys.
  local r = redis.call('SCAN', c, 'MATCH', bucket_pattern(),
                       'COUNT', math.max(1, math.floor(count / 10)))
  visited = visited + 10 * #r[2]
  local groups = {}
  for _, key in ipairs(r[2]) do
    if match(sub(key, #KEYS[1] + 2), '^%d*$') then
      local t = key_type(key)
      if t ~= 'hash' and t ~= 'none' then
        sums.bad = sums.bad + 1
        finding('type', key, t, 'hash')
      elseif t == 'hash' and sets_usable then
        local ids = own_fields(key, redis.call('HKEYS', key), 1)
        groups[#groups + 1] = { key = key, ids = records_in_no_set(ids) }
      end
    end
  end
  bury_records(groups)
  return r[1]
end

-- The ids of a ZSCAN or HSCAN page ({id, score or value, ...}) that have
-- no record; the pin is never a job.
local function without_record(flat)
  local lost = {}
  for i = 1, #flat, 2 do
    local id = flat[i]
    if id ~= PIN then
      sums.scanned = sums.scanned + 1
      if has_record(id) == false then lost[#lost + 1] = id end
    end
  end
  return lost
end

-- Members of sorted set `key` without a record; nil when it cannot be
-- read as one (key_ok false).
local function set_step(key, key_ok, c)
  if not key_ok then return nil end
  local r = redis.call('ZSCAN', key, c, 'COUNT', count)
  visited = visited + #r[2] / 2
  local lost = without_record(r[2])
  for _, id in ipairs(lost) do
    sums.members = sums.members + 1
    finding('member', key, id)
  end
  if repair and #lost > 0 then
    redis.call('ZREM', key, unpack(lost))
    -- A job in processing has a lease field: it goes with the member.
    if key == KEYS[3] and usable[6] then redis.call('HDEL', KEYS[6], unpack(lost)) end
    sums.repaired = sums.repaired + #lost
  end
  return r[1]
end

steps.d = function(c) return set_step(KEYS[2], usable[2], c) end
steps.p = function(c) return set_step(KEYS[3], usable[3], c) end
steps.x = function(c) return set_step(KEYS[4], usable[4], c) end
-- A..J: priority level 0..9 (F, level 5, is d).
for p = 0, 9 do
  if p ~= NORMAL then
    local key = level_key(p)
    steps[string.char(65 + p)] = function(c)
      return set_step(key, key_type(key) == 'zset', c)
    end
  end
end

steps.l = function(c)
  if not usable[6] then return nil end
  local r = redis.call('HSCAN', KEYS[6], c, 'COUNT', count)
  visited = visited + #r[2] / 2
  local lost = without_record(r[2])
  -- The field of a member of processing is the processing phase's.
  if usable[3] and #lost > 0 then
    local p, left = zmscore(KEYS[3], lost), {}
    for i = 1, #lost do
      if not p[i] then left[#left + 1] = lost[i] end
    end
    lost = left
  end
  for _, id in ipairs(lost) do
    sums.leases = sums.leases + 1
    finding('lease', KEYS[6], id)
  end
  if repair and #lost > 0 then
    redis.call('HDEL', KEYS[6], unpack(lost))
    sums.repaired = sums.repaired + #lost
  end
  return r[1]
end

-- The claim script's count of ids it dropped; read before any write.
local claim_dropped = 0
if usable[5] then
  claim_dropped = tonumber(redis.call('HGET', KEYS[5], 'orphans_removed')) or 0
end

-- Run the step of the cursor's phase; a phase with nothing to scan hands
-- over to the next at once, and so does a phase that ended having found
-- nothing while the call has read fewer than `count` elements: an empty
-- queue's pass is one call (each call checks the keys' types first).  A
-- step that found something ends the call, so that no step reads after
-- another has written (an error then, a slot migrating, changes
-- nothing) and no finding is lost to a later step's error.
local index = 1
while FSCK_PHASES[index] ~= phase do index = index + 1 end
local next_cursor = '0'
while index <= #FSCK_PHASES do
  local c = steps[FSCK_PHASES[index]](at)
  if c and c ~= '0' then
    next_cursor = FSCK_PHASES[index] .. c
    break
  end
  index = index + 1
  at = '0'
  if c and (#found > 0 or sums.repaired > 0 or visited >= count) then
    if index <= #FSCK_PHASES then next_cursor = FSCK_PHASES[index] .. '0' end
    break
  end
end

local out = { next_cursor, sums.scanned, sums.records, sums.members,
              sums.leases, sums.bad, sums.repaired, claim_dropped }
for i = 1, #found do out[#out + 1] = found[i] end
return out
