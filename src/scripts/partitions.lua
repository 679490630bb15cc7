-- partitions: set the queue's partition count, compare-and-set.  Runs on
-- the unpartitioned keys ({Q}); KEYS[5]'s field `partitions` holds the
-- count (absent: 1).  The caller read the stored count and found every
-- partition of it empty (a script reaches one slot only, so the
-- partitions {Q:i} are counted by the caller); this stores `n` only if
-- the count is still the one read, and never over jobs held by the
-- unpartitioned keys themselves when n > 1 (they would be stranded).
-- ARGV: expected (the count read, 1..256), n (1..256)
-- Returns {'ok', before} (stored, or already n), {'changed', stored}
-- (someone else set it since the read: nothing written), {'jobs', count}
-- (the unpartitioned keys hold jobs: nothing written), {'bad', raw} (the
-- stored field is not a count: nothing written).
local expected = arg_int(1, 'expected', 1, 256)
local n = arg_int(2, 'partitions', 1, 256)
if #ARGV > 2 then arg_bad('argument 3', ARGV[3], 'expected: partitions takes two') end
if arg_fault then return arg_refusal('partitions') end
local raw = redis.call('HGET', KEYS[5], 'partitions')
local stored = 1
if raw then
  stored = match(raw, '^%d+$') and #raw <= 3 and tonumber(raw)
  if not stored or stored < 1 or stored > 256 then return { 'bad', raw } end
end
if stored ~= expected then return { 'changed', format('%d', stored) } end
if stored == n then return { 'ok', format('%d', stored) } end
if n > 1 then
  local jobs = redis.call('ZCARD', KEYS[4])
  for _, p in ipairs(levels_in_use()) do jobs = jobs + redis.call('ZCARD', level_key(p)) end
  jobs = jobs + redis.call('ZCARD', KEYS[3])
  if redis.call('ZSCORE', KEYS[3], PIN) then jobs = jobs - 1 end
  if jobs > 0 then return { 'jobs', format('%d', jobs) } end
end
if n == 1 then redis.call('HDEL', KEYS[5], 'partitions')
else redis.call('HSET', KEYS[5], 'partitions', format('%d', n)) end
return { 'ok', format('%d', stored) }
