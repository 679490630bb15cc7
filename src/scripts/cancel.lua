-- cancel: delete a job that is still waiting to run.
-- ARGV: id
-- Returns 'cancelled', or why not: 'running' (a worker holds it), 'dead'
-- (use purge), 'notfound'.
--
-- A producer's hot path (most order timeouts are cancelled): a delayed
-- job of normal priority, in a queue without dedupe windows, costs the
-- four commands that find and delete it, above the line where the
-- prelude's functions are made.  Any other call (a bad id, another level,
-- a job not delayed, a bucket of the wrong type, a queue with windows)
-- goes on below it, having written nothing.
local id = ARGV[1]
if id and id ~= '' and #id <= 256 and not find(id, '[^!-~]')
   and redis.call('ZSCORE', KEYS[2], id)
   and redis.call('EXISTS', sub(KEYS[5], 1, -5) .. 'unique') == 0 then
  -- The record first: if its bucket cannot be reached (see the prelude's
  -- record_key), nothing has changed.
  local rk = KEYS[1]
  if find(id, '^%d+$') then rk = rk .. ':' .. sub(id, 1, -3) end
  if type(redis.pcall('HDEL', rk, id)) == 'number' then
    redis.call('ZREM', KEYS[2], id)
    return 'cancelled'
  end
end

-- prelude: here
id = arg_id(1, 'id')
if arg_fault then return arg_refusal('cancel') end
local key = delayed_find(id)
if key then
  -- As above; a bucket of the wrong type holds no record: the prelude's
  -- record_cmd logs it and goes on.  A job with a dedupe window leaves
  -- its tombstone.
  local tombs = unique_plan({ id })
  del_records({ id })
  redis.call('ZREM', key, id)
  unique_apply(tombs)
  return 'cancelled'
end
if redis.call('ZSCORE', KEYS[3], id) then return 'running' end
if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
return 'notfound'
