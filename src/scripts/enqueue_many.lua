-- enqueue_many: enqueue's work for several jobs of one queue in one call,
-- with one command per batch rather than per job (bulk producers).
-- ARGV: wake_channel, then per job the seven arguments of enqueue after
--       its wake channel: id ('' = generate), type, payload, 'delay'|'at',
--       ms, max_attempts, replace
-- Returns {now_ms, then per job: status, id, due_ms}, statuses as enqueue's.
local now = now_ms()
local n = (#ARGV - 1) / 7
local ids, generated = {}, 0
for i = 1, n do
  ids[i] = ARGV[7 * i - 5]
  if ids[i] == '' then generated = generated + 1 end
end
-- Generated ids come from one counter increment for the whole batch.
if generated > 0 then
  local next_id = redis.call('HINCRBY', KEYS[5], 'seq', generated) - generated
  for i = 1, n do
    if ids[i] == '' then
      next_id = next_id + 1
      ids[i] = tostring(next_id)
    end
  end
end
local found = redis.call('HMGET', KEYS[1], unpack(ids))
local taken = {}
for i = 1, n do if found[i] then taken[ids[i]] = true end end

local before = head_due(KEYS[2])
local out = { now }
local hset, zadd = {}, {}
local soonest = nil
for i = 1, n do
  local a = 7 * i - 5
  local id = ids[i]
  local status = 'ok'
  if taken[id] then
    if ARGV[a] == '' then
      -- A generated id that a record holds already: draw again.
      repeat
        id = tostring(redis.call('HINCRBY', KEYS[5], 'seq', 1))
      until redis.call('HEXISTS', KEYS[1], id) == 0 and not taken[id]
    elseif ARGV[a + 6] ~= '1' then
      status = 'exists'
    elseif redis.call('ZSCORE', KEYS[3], id) then
      status = 'running'
    else
      redis.call('ZREM', KEYS[4], id)
      status = 'replaced'
    end
  end
  local due = 0
  if status == 'ok' or status == 'replaced' then
    due = tonumber(ARGV[a + 4])
    if ARGV[a + 3] ~= 'at' then due = now + due end
    hset[#hset + 1] = id
    hset[#hset + 1] = encode({ type = ARGV[a + 1], payload = ARGV[a + 2],
      attempts = 0, max = tonumber(ARGV[a + 5]), created = now, due = due,
      fence = 0, err = '' })
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = id
    taken[id] = true
    if soonest == nil or due < soonest then soonest = due end
  end
  out[#out + 1] = status
  out[#out + 1] = id
  out[#out + 1] = due
end
if #hset > 0 then
  redis.call('HSET', KEYS[1], unpack(hset))
  redis.call('ZADD', KEYS[2], unpack(zadd))
  wake_if_sooner(ARGV[1], before, soonest)
end
return out
