-- ack: finish jobs that ran successfully; they are deleted.
-- ARGV: id1, fence1, id2, fence2, ...
-- Returns one integer per job: 1 acked, 0 refused because the job is no
-- longer held under that fence (its lease expired and it was reaped or
-- claimed again, or it was finished already).
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
-- A job in processing, and only such a job, has its claim's fence in the
-- lease hash: a match is the whole check.
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
local done, res = {}, {}
for i = 1, n do
  res[i] = 0
  if fences[i] and fences[i] == ARGV[2 * i] then
    done[#done + 1] = ids[i]
    res[i] = 1
  end
end
if #done > 0 then
  -- Buckets first: if one cannot be reached (see the prelude), the jobs
  -- stay held and the ack can be sent again.
  del_records(done)
  redis.call('ZREM', KEYS[3], unpack(done))
  redis.call('HDEL', KEYS[6], unpack(done))
end
return res
