-- claim: take up to `max` due jobs into processing, each with a lease that
-- ends at now + lease_ms, and count the attempt.
-- ARGV: max, lease_ms
-- Returns {now_ms, wait_ms, n, then n groups of 4:
--          id, attempt, fence, body}
-- where body is the record's MessagePack array {type, payload,
-- max_attempts, created_ms, due_ms, last_error}, for the client to decode:
-- the script only rewrites the plain-text head of each record.
-- wait_ms is the time until the next delayed job is due (0 when more are
-- due already), or -1 when none is delayed.  fence identifies this claim:
-- ack and fail must present it, so that a worker whose lease expired cannot
-- finish a job that was claimed again.
local now = now_ms()
local max = tonumber(ARGV[1])
local deadline = now + tonumber(ARGV[2])
-- One read serves both answers: of the first `max` jobs by due time, those
-- due are claimed, and the first one not due says how long to wait.
local head = redis.call('ZRANGE', KEYS[2], 0, max - 1, 'WITHSCORES')
local ids = {}
local wait = -1
for i = 1, #head, 2 do
  local due = tonumber(head[i + 1])
  if due > now then
    wait = due - now
    break
  end
  ids[#ids + 1] = head[i]
end
local n = #ids
if n == max then wait = 0 end
local out = { now, wait, 0 }
if n > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - 1)
  local raws = redis.call('HMGET', KEYS[1], unpack(ids))
  local fence = redis.call('HINCRBY', KEYS[5], 'fence', n) - n
  local hset, zadd, bury = {}, {}, {}
  local nh, no, claimed = 0, 3, 0
  local match, sub, format = string.match, string.sub, string.format
  for i = 1, n do
    local id, raw = ids[i], raws[i]
    -- The head, as split() reads it, inlined: this loop is the hot path.
    local attempts, body
    if raw then attempts, body = match(raw, '^2:(%d+):%d+:()') end
    if attempts then
      attempts = attempts + 1
      fence = fence + 1
      local rest = sub(raw, body)
      hset[nh + 1] = id
      hset[nh + 2] = format('2:%d:%d:', attempts, fence) .. rest
      zadd[nh + 1] = deadline
      zadd[nh + 2] = id
      nh = nh + 2
      out[no + 1] = id
      out[no + 2] = attempts
      out[no + 3] = fence
      out[no + 4] = rest
      no = no + 4
      claimed = claimed + 1
    elseif raw then
      -- Unreadable record: keep it for an operator rather than drop it.
      bury[#bury + 1] = now
      bury[#bury + 1] = id
    end
  end
  if claimed > 0 then
    redis.call('HSET', KEYS[1], unpack(hset))
    redis.call('ZADD', KEYS[3], unpack(zadd))
  end
  if #bury > 0 then redis.call('ZADD', KEYS[4], unpack(bury)) end
  out[3] = claimed
end
return out
