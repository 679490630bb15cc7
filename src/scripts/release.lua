-- release: give back claimed jobs that were never started (a worker that is
-- stopping returns the rest of its batch).  The attempt is not counted and
-- the job keeps its due time, so it runs next, on another worker.
-- ARGV: wake_channel, id1, fence1, id2, fence2, ...
-- Returns the number of jobs released; a pair whose fence is stale is
-- skipped (the job was reaped meanwhile).
local n = (#ARGV - 1) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
local held = {}
for i = 1, n do
  if fences[i] and fences[i] == ARGV[2 * i + 1] then held[#held + 1] = ids[i] end
end
if #held == 0 then return 0 end
-- The record is as the claim found it: its due time is still the job's.
local raws = get_records(held)
redis.call('ZREM', KEYS[3], unpack(held))
redis.call('HDEL', KEYS[6], unpack(held))
local zadd, soonest = {}, nil
for i = 1, #held do
  local j = decode(raws[i])
  local due = j and j.due or now_ms()
  zadd[#zadd + 1] = due
  zadd[#zadd + 1] = held[i]
  if soonest == nil or due < soonest then soonest = due end
end
local before = head_due(KEYS[2])
redis.call('ZADD', KEYS[2], unpack(zadd))
wake_if_sooner(ARGV[1], before, soonest)
return #held
