-- purge: delete dead jobs for good.
-- ARGV: id ('' = the oldest `batch` dead jobs), batch (1..10000)
-- Returns {deleted, remaining_dead}.  Purge reads no record field (an
-- unreadable record is deleted like any other), except for a job with a
-- dedupe window, whose window runs from its death: it leaves a tombstone
-- until then (see the prelude).
local id = arg_id(1, 'id', true)
local batch = arg_int(2, 'batch', 1, 10000)
if arg_fault then return arg_refusal('purge') end
local ids = dead_pick(id, batch)
if not ids then return { 0, redis.call('ZCARD', KEYS[4]) } end
if #ids > 0 then
  local tombs = unique_plan(ids, nil, function(i)
    return tonumber(redis.call('ZSCORE', KEYS[4], ids[i]))
  end)
  -- The records first: if a bucket cannot be reached (see the prelude),
  -- nothing has changed.
  del_records(ids)
  if id ~= '' then
    redis.call('ZREM', KEYS[4], id)
  else
    redis.call('ZREMRANGEBYRANK', KEYS[4], 0, #ids - 1)
  end
  unique_apply(tombs)
end
return { #ids, redis.call('ZCARD', KEYS[4]) }
