-- purge: delete dead jobs for good.
-- ARGV: id ('' = the oldest `batch` dead jobs), batch
-- Returns {deleted, remaining_dead}.
local ids
if ARGV[1] ~= '' then
  if redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then
    return { 0, redis.call('ZCARD', KEYS[4]) }
  end
  ids = { ARGV[1] }
else
  ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[2]) - 1)
  if #ids > 0 then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, #ids - 1) end
end
if #ids > 0 then del_records(ids) end
return { #ids, redis.call('ZCARD', KEYS[4]) }
