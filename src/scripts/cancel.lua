-- cancel: delete a job that is still waiting to run.
-- ARGV: id
-- Returns 'cancelled', or why not: 'running' (a worker holds it), 'dead'
-- (use purge), 'notfound'.
--
-- A producer's hot path (most order timeouts are cancelled): a job of
-- normal priority costs the three commands that find and delete it; the
-- prelude is made only for a bad id, another level or a job not delayed.
-- prelude: on demand
local id = ARGV[1]
if not (id and id ~= '' and #id <= 256 and not string.find(id, '[^!-~]')) then
  prelude()
  arg_id(1, 'id')
  return arg_refusal('cancel')
end
local key = KEYS[2]
if not redis.call('ZSCORE', key, id) then
  prelude()
  key = delayed_find(id)
end
if key then
  -- The record first: if its bucket cannot be reached (see the prelude),
  -- nothing has changed.  A bucket of the wrong type holds no record: the
  -- prelude's record_cmd logs it and goes on.
  local rk = KEYS[1]
  if string.find(id, '^%d+$') then rk = rk .. ':' .. string.sub(id, 1, -3) end
  if type(redis.pcall('HDEL', rk, id)) == 'table' then
    prelude()
    record_cmd('HDEL', rk, id)
  end
  redis.call('ZREM', key, id)
  return 'cancelled'
end
if redis.call('ZSCORE', KEYS[3], id) then return 'running' end
if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
return 'notfound'
