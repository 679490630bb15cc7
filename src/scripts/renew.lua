-- renew: extend the leases of claimed jobs a worker has not started yet.
-- A worker runs its batch one job at a time and starts a job only while
-- its lease outlasts the handler's timeout; when the rest of a long batch
-- runs short, it renews them (and reports what has finished, in the same
-- round trip) rather than run a job whose lease could expire under it.
-- ARGV: lease_ms, id1, fence1, id2, fence2, ...
-- Returns {now_ms, r1, r2, ...}: ri is 1 when job i is still held under
-- its fence and its lease now ends at now_ms + lease_ms, 0 when it is not
-- (its lease expired and it was reaped, or it was settled): the worker
-- must then not run it.
local lease_ms = arg_int(1, 'lease_ms', 1, MAX_AHEAD_MS)
if #ARGV % 2 ~= 1 then
  arg_bad('arguments', tostring(#ARGV), 'lease_ms and pairs of id and fence')
end
if arg_fault then return arg_refusal('renew') end
local n = (#ARGV - 1) / 2
local now = now_ms()
local out = { now }
if n == 0 then return out end
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
local deadline = format('%d', now + lease_ms)
local zadd = {}
for i = 1, n do
  if fences[i] and fences[i] == ARGV[2 * i + 1] and ids[i] ~= PIN then
    out[i + 1] = 1
    zadd[#zadd + 1] = deadline
    zadd[#zadd + 1] = ids[i]
  else
    out[i + 1] = 0
    arg_id(2 * i, 'id ' .. i)
    arg_int(2 * i + 1, 'fence ' .. i, 0, MAX_EXACT)
  end
end
if arg_fault then return arg_refusal('renew') end
if #zadd > 0 then redis.call('ZADD', KEYS[3], 'XX', unpack(zadd)) end
return out
