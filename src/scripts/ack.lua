-- ack: finish jobs that ran successfully; they are deleted.
-- ARGV: id1, fence1, id2, fence2, ...
-- Returns one integer per job: 1 acked, 0 refused because the job is no
-- longer held under that fence (its lease expired and it was reaped or
-- claimed again, or it was finished already).
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local raws = redis.call('HMGET', KEYS[1], unpack(ids))
local match = string.match
local done, res = {}, {}
for i = 1, n do
  res[i] = 0
  local raw = raws[i]
  -- The fence stands in the record's plain-text head: no decoding.  Only
  -- a job in processing has a fence other than 0 (every script that takes
  -- a job out of processing sets it to 0), so a match means the job is
  -- held under this claim, without a look at the processing set.
  local fence = raw and match(raw, '^2:%d+:(%d+):')
  if fence and fence ~= '0' and fence == ARGV[2 * i] then
    done[#done + 1] = ids[i]
    res[i] = 1
  end
end
if #done > 0 then
  redis.call('ZREM', KEYS[3], unpack(done))
  redis.call('HDEL', KEYS[1], unpack(done))
end
return res
