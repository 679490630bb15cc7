-- claim: take up to `max` due jobs into processing, each with a lease that
-- ends at now + lease_ms.
-- ARGV: max (1..1000), lease_ms (1 ms to 100 years)[, owner]
-- Returns {now_ms, wait_ms, n, then n groups of 4:
--          id, attempt, fence, body}
-- where body is the record's MessagePack array {type, payload,
-- max_attempts, created_ms, due_ms - created_ms, last_error}, for the
-- client to decode: the script reads records and never writes them.
-- wait_ms is the time until the next delayed job is due (0 when more are
-- due already), or -1 when none is delayed.  fence identifies this claim:
-- ack and fail must present it, so that a worker whose lease expired cannot
-- finish a job that was claimed again.  owner, when given, names the
-- claiming worker: the fences this claim hands out are recorded under it
-- (meta field claim:<owner> = "<first fence - 1> <count>"), so that if the
-- worker dies before it has listed its jobs, recover can give them back.
-- A due job whose record has no format-3 head (or whose bucket key is not
-- a hash) goes to dead; one without a record is dropped, logged and
-- counted in meta's orphans_removed.  The body is the client's to check
-- (libdelayq hands an unreadable one over as type "" with the error
-- "unreadable record", and the daemon buries it).
-- A paused queue (meta field `paused`, see pause.lua) hands out nothing:
-- the reply is then {now_ms, -1, 0, 'paused'}.  Jobs past their expiry
-- leave first (to dead, or dropped), and are never handed out.
--
-- The drain's hot path: a claim of a queue that is not paused, uses the
-- normal priority only and has no expiry due, whose due jobs all have
-- readable heads in hashes, costs its commands, above the line where the
-- prelude's functions are made (their closures cost each call more than
-- the commands did).  Any other call goes on below it, having written
-- nothing: it reads again, and does what this path does besides.
do
  local max, lease_ms, owner = ARGV[1], ARGV[2], ARGV[3]
  max = max and #max <= 4 and find(max, '^%d+$') and tonumber(max)
  lease_ms = lease_ms and #lease_ms <= 13 and find(lease_ms, '^%d+$') and tonumber(lease_ms)
  local state = max and max >= 1 and max <= 1000 and lease_ms and lease_ms >= 1
                and lease_ms <= MAX_AHEAD_MS
                and (owner == nil or (owner ~= '' and #owner <= 200
                                      and not find(owner, '[^!-~]')))
                and redis.call('HMGET', KEYS[5], 'paused', 'levels')
  local t = state and not state[1] and (not state[2] or state[2] == '') and redis.call('TIME')
  local now = t and t[1] * 1000 + math.floor(t[2] / 1000)
  local expiring = now and redis.call('ZRANGE', sub(KEYS[5], 1, -5) .. 'expire_at', '-inf',
                                      now, 'BYSCORE', 'LIMIT', 0, 1)
  if expiring and #expiring == 0 then
    local got = redis.call('ZRANGE', KEYS[2], '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
    local k, wait = #got, 0
    if k < max then
      local h = redis.call('ZRANGE', KEYS[2], k, k, 'WITHSCORES')[2]
      wait = h and tonumber(h) - now or -1
    end
    if k == 0 then return { now, wait, 0 } end
    -- The records, one HMGET per record key (the prelude's get_records,
    -- inlined); a key of the wrong type, a missing record or one without
    -- a format-3 head is the path below's to handle.
    local keys, by, raws, heads = {}, {}, {}, {}
    for i = 1, k do
      local id, key = got[i], KEYS[1]
      if find(id, '^%d+$') then key = key .. ':' .. sub(id, 1, -3) end
      local g = by[key]
      if not g then g = { ids = {}, at = {} }; by[key] = g; keys[#keys + 1] = key end
      g.ids[#g.ids + 1] = id
      g.at[#g.at + 1] = i
    end
    local ok = true
    for _, key in ipairs(keys) do
      local g = by[key]
      local r = redis.pcall('HMGET', key, unpack(g.ids))
      if r.err then ok = false break end
      for j = 1, #g.at do raws[g.at[j]] = r[j] end
    end
    for i = 1, ok and k or 0 do
      local a, body
      if raws[i] then a, body = match(raws[i], '^3:(%d+):()') end
      if not a then ok = false break end
      heads[i] = body
    end
    if ok then
      redis.call('ZREMRANGEBYRANK', KEYS[2], 0, k - 1)
      local fence = redis.call('HINCRBY', KEYS[5], 'fence', k) - k
      if owner then
        redis.call('HSET', KEYS[5], 'claim:' .. owner, format('%d %d', fence, k))
      end
      local deadline = format('%d', now + lease_ms)
      local lease, zadd, out = { PIN, PIN }, { PIN_SCORE, PIN }, { now, wait, k }
      local nl, no = 2, 3
      for i = 1, k do
        local id, raw = got[i], raws[i]
        fence = fence + 1
        lease[nl + 1] = id
        lease[nl + 2] = format('%d', fence)
        zadd[nl + 1] = deadline
        zadd[nl + 2] = id
        nl = nl + 2
        out[no + 1] = id
        out[no + 2] = match(raw, '^3:(%d+):') + 1
        out[no + 3] = fence
        out[no + 4] = sub(raw, heads[i])
        no = no + 4
      end
      redis.call('HSET', KEYS[6], unpack(lease))
      redis.call('ZADD', KEYS[3], unpack(zadd))
      return out
    end
  end
end

-- prelude: here
local max = arg_int(1, 'max', 1, 1000)
local lease_ms = arg_int(2, 'lease_ms', 1, MAX_AHEAD_MS)
local owner = ARGV[3]
if owner and not is_plain(owner, 200) then
  arg_bad('owner', owner, 'a name (1..200 printable bytes, no spaces)')
end
if arg_fault then return arg_refusal('claim') end
-- One read of meta for both the pause and the priority levels in use
-- (levels_in_use takes them from levels_read, see the prelude).
local state = redis.call('HMGET', KEYS[5], 'paused', 'levels')
if state[1] then return { now_ms(), -1, 0, 'paused' } end
levels_read = state[2] or ''
local now = now_ms()
-- A job past its expiry is not handed out (lib's expire_due): should more
-- have expired than one call takes, this claim takes nothing and the
-- worker asks again at once.
if select(2, expire_due(now, 1000)) then return { now, 0, 0 } end
-- Numbers handed to redis.call are formatted with "%.17g" and read back
-- with strtod, a cost per job: the deadline is formatted once, as an
-- integer, and the due jobs are read without their scores.
local deadline = format('%d', now + lease_ms)
-- Priority orders due jobs only: the levels are walked most urgent first,
-- each giving its due jobs in due order until the batch is full.  A level
-- found empty is dropped from meta's levels (see the prelude).
local ids, taken, gone, next_due = {}, {}, {}, nil
for _, p in ipairs(levels_in_use()) do
  local key = level_key(p)
  local got = redis.call('ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, max - #ids)
  local k = #got
  for i = 1, k do ids[#ids + 1] = got[i] end
  if k > 0 then taken[#taken + 1] = { key, k } end
  if #ids == max then break end
  -- All of this level's due jobs are taken: the one after them (rank k,
  -- the taken ones leave below) is not due yet, or there is none.
  local h = redis.call('ZRANGE', key, k, k, 'WITHSCORES')[2]
  if h then
    h = tonumber(h)
    if next_due == nil or h < next_due then next_due = h end
  elseif p ~= NORMAL then
    gone[#gone + 1] = p
  end
end
local n = #ids
local wait = 0
local raws = n > 0 and get_records(ids)     -- reads first (see the prelude)
for _, t in ipairs(taken) do redis.call('ZREMRANGEBYRANK', t[1], 0, t[2] - 1) end
drop_levels(gone)
if n < max then
  -- All due jobs are taken: the next one's due time says how long to wait.
  wait = next_due and next_due - now or -1
end
local out = { now, wait, 0 }
if n > 0 then
  local fence = redis.call('HINCRBY', KEYS[5], 'fence', n) - n
  if owner then
    redis.call('HSET', KEYS[5], 'claim:' .. owner, format('%d %d', fence, n))
  end
  local lease, zadd, bury, orphans = { PIN, PIN }, { PIN_SCORE, PIN }, {}, {}
  local nl, no, claimed = 2, 3, 0
  for i = 1, n do
    local id, raw = ids[i], raws[i]
    -- The head, as split() reads it, inlined: this loop is the hot path.
    local attempts, body
    if raw then attempts, body = match(raw, '^3:(%d+):()') end
    if attempts then
      fence = fence + 1
      lease[nl + 1] = id
      lease[nl + 2] = format('%d', fence)
      zadd[nl + 1] = deadline
      zadd[nl + 2] = id
      nl = nl + 2
      out[no + 1] = id
      out[no + 2] = attempts + 1
      out[no + 3] = fence
      out[no + 4] = sub(raw, body)
      no = no + 4
      claimed = claimed + 1
    elseif raw then
      -- Unreadable record: keep it for an operator rather than drop it.
      bury[#bury + 1] = now
      bury[#bury + 1] = id
    else
      orphans[#orphans + 1] = id
    end
  end
  if claimed > 0 then
    redis.call('HSET', KEYS[6], unpack(lease))
    redis.call('ZADD', KEYS[3], unpack(zadd))
  end
  if #bury > 0 then redis.call('ZADD', KEYS[4], unpack(bury)) end
  note_orphans(orphans, 2)   -- (named after the normal level's set)
  out[3] = claimed
end
return out
