-- ack: finish jobs that ran successfully; they are deleted.
-- ARGV: id1, fence1, id2, fence2, ...
-- Returns one integer per job: 1 acked, 0 refused because the job is no
-- longer held under that fence (its lease expired and it was reaped or
-- claimed again, or it was finished already).
if #ARGV == 0 or #ARGV % 2 ~= 0 then
  return redis.error_reply('ERR delayq: ack: expected pairs of id and fence, got '
                           .. #ARGV .. ' arguments')
end
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
-- A job in processing, and only such a job, has its claim's fence in the
-- lease hash: a match is the whole check (a lease holds a fence that claim
-- wrote, a whole number, so a matching pair is well formed; the pin's
-- field and value are equal, so it is matched only by name).  A pair that
-- does not match changes nothing, and only then is it checked, off the
-- hot path.
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
local done, res = {}, {}
for i = 1, n do
  res[i] = 0
  if fences[i] and fences[i] == ARGV[2 * i] and ids[i] ~= PIN then
    done[#done + 1] = ids[i]
    res[i] = 1
  else
    arg_id(2 * i - 1, 'id ' .. i)
    arg_int(2 * i, 'fence ' .. i, 0, MAX_EXACT)
  end
end
if arg_fault then return arg_refusal('ack') end
if #done > 0 then
  -- Jobs with a dedupe window leave a tombstone, and a job with a next
  -- run (a debounced add while it ran) gives way to it (see the prelude):
  -- one EXISTS says whether the queue has either.
  local base, tombs, nexts = sub(KEYS[5], 1, -5), nil, nil
  if redis.call('EXISTS', base .. 'unique', base .. 'next') > 0 then
    tombs = unique_plan(done)
    nexts = next_plan(done)
  end
  -- Buckets first: if one cannot be reached (see the prelude), the jobs
  -- stay held and the ack can be sent again.
  del_records(done)
  redis.call('ZREM', KEYS[3], unpack(done))
  redis.call('HDEL', KEYS[6], unpack(done))
  unique_apply(tombs)
  next_apply(nexts)
end
return res
