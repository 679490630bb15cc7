#!lua flags=no-writes
-- show: one job and where it stands.
-- ARGV: id
-- Returns {state, type, payload, attempts, max_attempts, created_ms, due_ms,
--          fence, last_error, state_ms, now_ms, unreadable, where,
--          priority} where
-- state is 'delayed', 'processing' (state_ms = lease deadline), 'dead'
-- (state_ms = time of death), 'orphan' (a record in no set) or
-- 'unreadable'; or {'notfound'}.  unreadable is '' for a record that
-- reads, else why it does not (and then the fields are what could be
-- read of it: '' or 0 for the rest); where is the set the id is in
-- ('orphan' for none), for an unreadable record too; priority is the
-- job's level, 0..9 (5, normal, for an unreadable record).
--
-- Producers call it to follow their jobs: a delayed job of normal
-- priority costs its three commands and the record's decoding; the rest
-- of the prelude is made only for a bad id or a job elsewhere.
-- prelude: on demand except read_record
local id = ARGV[1]
if not (id and id ~= '' and #id <= 256 and not string.find(id, '[^!-~]')) then
  prelude()
  arg_id(1, 'id')
  return arg_refusal('show')
end
local rk = KEYS[1]
if string.find(id, '^%d+$') then rk = rk .. ':' .. string.sub(id, 1, -3) end
local raw = redis.pcall('HGET', rk, id)
if type(raw) == 'table' then
  -- Not a hash (logged, and read as unreadable), or an error raised.
  prelude()
  raw = get_record(id)
end
if not raw then return { 'notfound' } end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local state, at = 'delayed', redis.call('ZSCORE', KEYS[2], id)
if not at then
  prelude()
  state, at = 'orphan', 0
  local _, s = delayed_find(id)
  if s then state, at = 'delayed', s else
    s = redis.call('ZSCORE', KEYS[3], id)
    if s then state, at = 'processing', s else
      s = redis.call('ZSCORE', KEYS[4], id)
      if s then state, at = 'dead', s end
    end
  end
end
-- A job in processing is in its attempt attempts + 1, under the fence of
-- the claim that holds it; any other has no fence (0).
local fence = 0
if state == 'processing' then fence = tonumber(redis.call('HGET', KEYS[6], id)) or 0 end
local j, why, part = read_record(raw)
if not j then
  -- Every element is set (a nil would end Lua's array, and the reply,
  -- early): what could be read, '' or 0 for the rest.
  local attempts = part.attempts or 0
  if state == 'processing' then attempts = attempts + 1 end
  return { 'unreadable', part.type or '', part.payload or '', attempts, 0, 0, 0,
           fence, part.err or '', tonumber(at), now, why, state, NORMAL }
end
local attempts = j.attempts
if state == 'processing' then attempts = attempts + 1 end
return { state, j.type, j.payload, attempts, j.max, j.created, j.due,
         fence, j.err, tonumber(at), now, '', state, j.prio }
