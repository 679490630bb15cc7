-- reap: jobs whose lease expired (their worker died or hung) go through the
-- same retry-or-dead decision as a failure, with the error "lease expired".
-- ARGV: wake_channel, batch, backoff_base_ms, backoff_cap_ms, jitter, seed,
--       default_max_attempts, then optional pairs type, max_attempts
-- Returns {retried, dead, wait_ms}: wait_ms is 0 when more leases have
-- expired already, else the time until the next lease expires, or -1.
local now = now_ms()
local batch = tonumber(ARGV[2])
-- As in claim, one read: the expired leases among the first `batch`, and
-- the first live one's deadline.
local head = redis.call('ZRANGE', KEYS[3], 0, batch - 1, 'WITHSCORES')
local ids = {}
local wait = -1
for i = 1, #head, 2 do
  if head[i] == PIN then break end   -- last of all: nothing else processing
  local deadline = tonumber(head[i + 1])
  if deadline > now then
    wait = deadline - now
    break
  end
  ids[#ids + 1] = head[i]
end
local n = #ids
if n == batch then wait = 0 end
local retried, dead = 0, 0
if n > 0 then
  local per_type = {}
  for i = 8, #ARGV - 1, 2 do per_type[ARGV[i]] = tonumber(ARGV[i + 1]) end
  local default_max = tonumber(ARGV[7])
  local rng = make_rng(ARGV[6])
  local base, cap, jitter = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local raws = get_records(ids)
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, n - 1)
  redis.call('HDEL', KEYS[6], unpack(ids))
  local rewrite, recs, zdelayed, zdead = {}, {}, {}, {}
  local soonest = nil
  for i = 1, n do
    local id = ids[i]
    local j = decode(raws[i])
    if not j then
      if raws[i] then
        zdead[#zdead + 1] = now
        zdead[#zdead + 1] = id
        dead = dead + 1
        local attempts, body = split(raws[i])
        if attempts then
          rewrite[#rewrite + 1] = id
          recs[#recs + 1] = restamp(raws[i], body, attempts + 1)
        end
      end
    else
      j.attempts = j.attempts + 1
      j.err = 'lease expired'
      if j.attempts >= attempts_allowed(j, per_type[j.type] or default_max) then
        zdead[#zdead + 1] = now
        zdead[#zdead + 1] = id
        dead = dead + 1
      else
        j.due = now + backoff_ms(j.attempts, base, cap, jitter, rng)
        zdelayed[#zdelayed + 1] = j.due
        zdelayed[#zdelayed + 1] = id
        if soonest == nil or j.due < soonest then soonest = j.due end
        retried = retried + 1
      end
      rewrite[#rewrite + 1] = id
      recs[#recs + 1] = encode(j)
    end
  end
  if #rewrite > 0 then set_records(rewrite, recs) end
  if #zdead > 0 then redis.call('ZADD', KEYS[4], unpack(zdead)) end
  if #zdelayed > 0 then
    local before = head_due(KEYS[2])
    redis.call('ZADD', KEYS[2], unpack(zdelayed))
    wake_if_sooner(ARGV[1], before, soonest)
  end
end
return { retried, dead, wait }
