-- cancel: delete a job that is still waiting to run.
-- ARGV: id
-- Returns 'cancelled', or why not: 'running' (a worker holds it), 'dead'
-- (use purge), 'notfound'.
local id = arg_id(1, 'id')
if arg_fault then return arg_refusal('cancel') end
local key = delayed_find(id)
if key then
  -- The record first: if its bucket cannot be reached (see the prelude),
  -- nothing has changed.
  del_records({ id })
  redis.call('ZREM', key, id)
  return 'cancelled'
end
if redis.call('ZSCORE', KEYS[3], id) then return 'running' end
if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
return 'notfound'
