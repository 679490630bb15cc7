-- fail: record a failed attempt; retry the job later or bury it as dead.
-- ARGV: wake_channel, id, fence, error, mode ('retry' | 'dead'),
--       retry_delay_ms (-1 = backoff), backoff_base_ms, backoff_cap_ms,
--       jitter (0..1), seed, default_max_attempts
-- Returns {status, at_ms}: 'retry' with the new due time, 'dead' with the
-- time of death, or 'stale' (0) when the job is not held under that fence.
-- A retry waits retry_delay_ms when it is given, but never longer than
-- backoff_cap_ms: a handler (an HTTP server's Retry-After) cannot park a
-- job for ever.
local channel = arg_str(1, 'wake_channel')
local id = arg_id(2, 'id')
local fence = arg_str(3, 'fence')
arg_int(3, 'fence', 0, MAX_EXACT)
local err = arg_str(4, 'error')
local mode = arg_one_of(5, 'mode', 'retry', 'dead')
local delay = arg_int(6, 'retry_delay_ms', -1, MAX_EXACT)
local policy = arg_policy(7)
local default_max = arg_int(11, 'default_max_attempts', 0, MAX_ATTEMPTS)
if arg_fault then return arg_refusal('fail') end

if redis.call('HGET', KEYS[6], id) ~= fence then return { 'stale', 0 } end
-- Every read first (the record, the delayed head), then the writes.
local raw = get_record(id)
local before = head_due_all()
local now = now_ms()
local j = decode(raw)

local dropped = not j and next_plan({ id }, { raw })
if not j then
  -- Unreadable: nothing can run it, so it is buried as it is, for an
  -- operator (show and dlq list say why), with its attempt counted where
  -- its head can be read.  Without a record it is dropped and counted.
  local attempts, body = split(raw)
  if attempts then set_record(id, restamp(raw, body, attempts + 1)) end
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[6], id)
  if raw then
    redis.call('ZADD', KEYS[4], now, id)
  else
    note_orphans({ id }, 3)
  end
  next_apply(dropped)   -- its next run, if any, cannot be its own: dropped
  return { 'dead', now }
end

-- A job with a next run (a debounced add while it ran) gives way to it,
-- retry or not: the newer payload runs instead (see the prelude).
local nexts = next_plan({ id }, { raw })

j.attempts = j.attempts + 1
if delay < 0 then
  delay = backoff_ms(j.attempts, policy.base, policy.cap, policy.jitter,
                     make_rng(policy.seed))
elseif delay > policy.cap then
  delay = policy.cap
end
j.err = err
local status, at = retry_or_bury(j, now, attempts_allowed(j, default_max),
                                 mode == 'dead', delay)
if nexts and nexts.took[id] then
  -- What happened to the job: it is due again, as its next run.
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[6], id)
  next_apply(nexts, channel)
  return { 'retry', nexts.soonest }
end
local rearm = status == 'retry' and expiry_again({ id }, { j })
-- The record first: if its bucket cannot be reached (see the prelude),
-- nothing has changed.
set_record(id, encode(j))
redis.call('ZREM', KEYS[3], id)
redis.call('HDEL', KEYS[6], id)
if status == 'dead' then
  redis.call('ZADD', KEYS[4], at, id)
else
  delayed_add({ [j.prio] = { at, id } })   -- a retry keeps its priority
  expiry_rearm(rearm)                      -- nor its expiry (see the prelude)
  wake_if_sooner(channel, before, at)
end
next_apply(nexts, channel)   -- an entry of an older job of this id goes
return { status, at }
