-- cancel: delete a job that is still waiting to run.
-- ARGV: id
-- Returns 'cancelled', or why not: 'running' (a worker holds it), 'dead'
-- (use purge), 'notfound'.
local id = ARGV[1]
if redis.call('ZREM', KEYS[2], id) == 1 then
  redis.call('HDEL', record_key(id), id)
  return 'cancelled'
end
if redis.call('ZSCORE', KEYS[3], id) then return 'running' end
if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
return 'notfound'
