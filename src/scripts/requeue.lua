-- requeue: give dead jobs a new life, due now with their attempts reset;
-- the last error is kept for reference.
-- ARGV: wake_channel, id ('' = the oldest `batch` dead jobs), batch
-- Returns {moved, remaining_dead}; moved is 0 when the id is not dead.
local now = now_ms()
local ids
if ARGV[2] ~= '' then
  if not redis.call('ZSCORE', KEYS[4], ARGV[2]) then
    return { 0, redis.call('ZCARD', KEYS[4]) }
  end
  ids = { ARGV[2] }
else
  ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[3]) - 1)
end
local moved = 0
if #ids > 0 then
  local raws = get_records(ids)         -- reads first (see the prelude)
  redis.call('ZREM', KEYS[4], unpack(ids))
  local back, recs, zadd, unreadable = {}, {}, {}, {}
  for i, id in ipairs(ids) do
    local j = decode(raws[i])
    if j then
      j.attempts = 0
      j.due = now
      back[#back + 1] = id
      recs[#recs + 1] = encode(j)
      zadd[#zadd + 1] = now
      zadd[#zadd + 1] = id
      moved = moved + 1
    elseif raws[i] then
      unreadable[#unreadable + 1] = now
      unreadable[#unreadable + 1] = id
    end
  end
  -- An unreadable record cannot run: it stays dead for an operator.
  if #unreadable > 0 then redis.call('ZADD', KEYS[4], unpack(unreadable)) end
  if moved > 0 then
    local before = head_due(KEYS[2])
    set_records(back, recs)
    redis.call('ZADD', KEYS[2], unpack(zadd))
    wake_if_sooner(ARGV[1], before, now)
  end
end
return { moved, redis.call('ZCARD', KEYS[4]) }
