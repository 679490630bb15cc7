-- release: give back claimed jobs that were never started (a worker that is
-- stopping returns the rest of its batch).  The attempt is not counted and
-- the job keeps its due time, so it runs next, on another worker.
-- ARGV: wake_channel, id1, fence1, id2, fence2, ...
-- Returns the number of jobs released; a pair whose fence is stale is
-- skipped (the job was reaped meanwhile).
local n = (#ARGV - 1) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local held = redis.call('ZMSCORE', KEYS[3], unpack(ids))
local raws = redis.call('HMGET', KEYS[1], unpack(ids))
local hset, zadd, back = {}, {}, {}
local soonest = nil
for i = 1, n do
  local j = held[i] and decode(raws[i])
  if j and j.fence == tonumber(ARGV[2 * i + 1]) then
    j.attempts = j.attempts - 1
    j.fence = 0
    hset[#hset + 1] = ids[i]
    hset[#hset + 1] = encode(j)
    zadd[#zadd + 1] = j.due
    zadd[#zadd + 1] = ids[i]
    back[#back + 1] = ids[i]
    if soonest == nil or j.due < soonest then soonest = j.due end
  end
end
if #back > 0 then
  local before = head_due(KEYS[2])
  redis.call('ZREM', KEYS[3], unpack(back))
  redis.call('HSET', KEYS[1], unpack(hset))
  redis.call('ZADD', KEYS[2], unpack(zadd))
  wake_if_sooner(ARGV[1], before, soonest)
end
return #back
