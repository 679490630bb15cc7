-- ack: finish jobs that ran successfully; they are deleted.
-- ARGV: id1, fence1, id2, fence2, ...
-- Returns one integer per job: 1 acked, 0 refused because the job is no
-- longer held under that fence (its lease expired and it was reaped or
-- claimed again, or it was finished already).
--
-- The drain's hot path: every pair held under its fence, in a queue
-- without dedupe windows or next runs, costs its commands, above the line
-- where the prelude's functions are made (a worker acks every batch).
-- Any other call goes on below it, having written nothing.
if #ARGV == 0 or #ARGV % 2 ~= 0 then
  return redis.error_reply('ERR delayq: ack: expected pairs of id and fence, got '
                           .. #ARGV .. ' arguments')
end
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
do
  local all = true
  for i = 1, n do
    local f = fences[i]
    if not (f and f == ARGV[2 * i] and ids[i] ~= PIN) then all = false break end
  end
  local base = sub(KEYS[5], 1, -5)
  if all and redis.call('EXISTS', base .. 'unique', base .. 'next') == 0 then
    -- The records, by record key (the prelude's record_key, inlined); one
    -- of the wrong type holds none of them, as record_cmd says.
    local keys, by, res = {}, {}, {}
    for i = 1, n do
      local id, k = ids[i], KEYS[1]
      if find(id, '^%d+$') then k = k .. ':' .. sub(id, 1, -3) end
      local g = by[k]
      if not g then g = {}; by[k] = g; keys[#keys + 1] = k end
      g[#g + 1] = id
      res[i] = 1
    end
    for _, k in ipairs(keys) do
      local r = redis.pcall('HDEL', k, unpack(by[k]))
      if type(r) == 'table' and r.err then
        if not match(r.err, '^WRONGTYPE') then error(r) end
        redis.log(redis.LOG_WARNING, 'delayq: ' .. k .. ' is not a hash: HDEL skipped, '
                  .. 'the records of its jobs are unreadable')
      end
    end
    redis.call('ZREM', KEYS[3], unpack(ids))
    redis.call('HDEL', KEYS[6], unpack(ids))
    return res
  end
end

-- prelude: here
-- A job in processing, and only such a job, has its claim's fence in the
-- lease hash: a match is the whole check (a lease holds a fence that claim
-- wrote, a whole number, so a matching pair is well formed; the pin's
-- field and value are equal, so it is matched only by name).  A pair that
-- does not match changes nothing, and only then is it checked, off the
-- hot path.
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
