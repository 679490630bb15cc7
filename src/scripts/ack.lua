-- ack: finish jobs that ran successfully; they are deleted.
-- ARGV: id1, fence1, id2, fence2, ...
-- Returns one integer per job: 1 acked, 0 refused because the job is no
-- longer held under that fence (its lease expired and it was reaped or
-- claimed again, or it was finished already).
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local held = redis.call('ZMSCORE', KEYS[3], unpack(ids))
local raws = redis.call('HMGET', KEYS[1], unpack(ids))
local done, res = {}, {}
for i = 1, n do
  res[i] = 0
  if held[i] and raws[i] then
    -- The fence stands in the record's plain-text head: no decoding.
    local fence = string.match(raws[i], '^2:%d+:(%d+):')
    if fence and fence == ARGV[2 * i] then
      done[#done + 1] = ids[i]
      res[i] = 1
    end
  end
end
if #done > 0 then
  redis.call('ZREM', KEYS[3], unpack(done))
  redis.call('HDEL', KEYS[1], unpack(done))
end
return res
