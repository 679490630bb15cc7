#!lua flags=no-writes
-- stats: the queue's figures in one consistent read.
-- Returns {now_ms, delayed (not yet due), due (due, waiting for a worker),
--          processing, dead, next_due_in_ms (-1 when nothing is delayed),
--          expired (processing past their lease, waiting for the reaper),
--          paused_since_ms (when the queue was paused; -1: it is not),
--          then ten: the due jobs of each priority, 0 (most urgent) to 9,
--          then oldest_due_ms (the due time of the job that has been due
--          longest; -1 when none is due), then jobs_expired (jobs that
--          reached their expiry unstarted, ever: meta's jobs_expired), then
--          jobs_cancelled (jobs cancelled, waiting or running, ever:
--          meta's jobs_cancelled)}
-- ARGV: none
if #ARGV > 0 then arg_bad('argument 1', ARGV[1], 'expected: stats takes none') end
if arg_fault then return arg_refusal('stats') end
local now = now_ms()
local total, due, by_prio = 0, 0, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
for _, p in ipairs(levels_in_use()) do
  local key = level_key(p)
  local d = redis.call('ZCOUNT', key, '-inf', now)
  total = total + redis.call('ZCARD', key)
  due = due + d
  by_prio[p + 1] = d
end
local head = head_due_all()
local next_in = -1
if head then next_in = math.max(0, head - now) end
local processing = redis.call('ZCARD', KEYS[3])
if processing > 0 and redis.call('ZSCORE', KEYS[3], PIN) then processing = processing - 1 end
local meta = redis.call('HMGET', KEYS[5], 'paused', 'jobs_expired', 'jobs_cancelled')
local out = { now, total - due, due, processing,
              redis.call('ZCARD', KEYS[4]), next_in,
              redis.call('ZCOUNT', KEYS[3], '-inf', now),
              tonumber(meta[1]) or -1 }
for p = 1, 10 do out[8 + p] = by_prio[p] end
out[19] = -1
if head and head <= now then out[19] = head end
out[20] = tonumber(meta[2]) or 0
out[21] = tonumber(meta[3]) or 0
return out
