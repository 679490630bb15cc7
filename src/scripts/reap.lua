-- reap: jobs whose lease expired (their worker died or hung) go through the
-- same retry-or-dead decision as a failure, with the error "lease expired".
-- ARGV: wake_channel, batch, backoff_base_ms, backoff_cap_ms, jitter, seed,
--       default_max_attempts, then optional pairs type, max_attempts
-- Jobs past their expiry (lib's expire_due) leave too, also from a paused
-- queue or one that no worker claims from.
-- Returns {retried, dead, wait_ms, expired}: wait_ms is 0 when more leases
-- or expiries have passed already, else the time until the next lease
-- or expiry ends, or -1; expired counts the jobs that expired.
-- Everything is read and checked before the first write: a record that
-- cannot be read goes to dead (its attempt counted where its head can be
-- read) and costs the other jobs of the pass nothing.
local channel = arg_str(1, 'wake_channel')
local batch = arg_int(2, 'batch', 1, 100000)
local policy = arg_policy(3)
local default_max = arg_int(7, 'default_max_attempts', 0, MAX_ATTEMPTS)
local per_type = {}
if (#ARGV - 7) % 2 ~= 0 then arg_bad('type', ARGV[#ARGV], 'followed by its max_attempts') end
for i = 8, #ARGV - 1, 2 do
  per_type[ARGV[i]] = arg_int(i + 1, 'max_attempts of ' .. ARGV[i], 0, MAX_ATTEMPTS)
end
if arg_fault then return arg_refusal('reap') end

local now = now_ms()
local expired, more = expire_due(now, batch)
unique_sweep(now, batch)
-- The wait of the lease pass, shortened by the expiries (read at the end:
-- a retry puts its job's expiry back at its own time).
local function until_next(wait)
  if more then return 0 end
  local next_expiry = redis.call('ZRANGE', (expiry_keys()), 0, 0, 'WITHSCORES')[2]
  next_expiry = next_expiry and tonumber(next_expiry)
  if next_expiry then
    local w = math.max(0, next_expiry - now)
    if wait < 0 or w < wait then return w end
  end
  return wait
end
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
if n == 0 then return { 0, 0, until_next(wait), expired } end

local raws = get_records(ids)
-- Jobs that give way to a next run: not before the retry would have been
-- due, since the run whose lease expired may still be under way.
local rng = make_rng(policy.seed)
local nexts = next_plan(ids, raws, function(i)
  local j = decode(raws[i])
  return j and now + backoff_ms(j.attempts + 1, policy.base, policy.cap, policy.jitter, rng)
end)
local before = head_due_all()
local rewrite, recs, zdelayed, zdead, orphans = {}, {}, {}, {}, {}
local any_delayed = false
local back, back_jobs = {}, {}   -- the retried, for their expiries
local retried, dead, soonest = 0, 0, nil
for i = 1, n do
  local id, raw = ids[i], raws[i]
  local j = decode(raw)
  if nexts and nexts.took[id] then
    retried = retried + 1     -- it runs again, as its next run
  elseif j then
    j.attempts = j.attempts + 1
    j.err = 'lease expired'
    if j.attempts >= attempts_allowed(j, per_type[j.type] or default_max) then
      zdead[#zdead + 1] = now
      zdead[#zdead + 1] = id
      dead = dead + 1
    else
      j.due = now + backoff_ms(j.attempts, policy.base, policy.cap, policy.jitter, rng)
      add_to(zdelayed, j.prio, j.due, id)
      back[#back + 1], back_jobs[#back_jobs + 1] = id, j
      any_delayed = true
      if soonest == nil or j.due < soonest then soonest = j.due end
      retried = retried + 1
    end
    rewrite[#rewrite + 1] = id
    recs[#recs + 1] = encode(j)
  elseif raw then
    zdead[#zdead + 1] = now
    zdead[#zdead + 1] = id
    dead = dead + 1
    local attempts, body = split(raw)
    if attempts then
      rewrite[#rewrite + 1] = id
      recs[#recs + 1] = restamp(raw, body, attempts + 1)
    end
  else
    orphans[#orphans + 1] = id
  end
end
local rearm = #back > 0 and expiry_again(back, back_jobs)
-- Records first: if a bucket cannot be reached (see the prelude), nothing
-- has changed.
if #rewrite > 0 then set_records(rewrite, recs) end
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, n - 1)
redis.call('HDEL', KEYS[6], unpack(ids))
if #zdead > 0 then redis.call('ZADD', KEYS[4], unpack(zdead)) end
if any_delayed then
  delayed_add(zdelayed)
  expiry_rearm(rearm)
  wake_if_sooner(channel, before, soonest)
end
next_apply(nexts, channel)
note_orphans(orphans, 3)
return { retried, dead, until_next(wait), expired }
