#!lua flags=no-writes
-- show: one job and where it stands.
-- ARGV: id, then optional form: 'raw' (the clients' own calls, below)
-- Returns {state, type, payload, attempts, max_attempts, created_ms, due_ms,
--          fence, last_error, state_ms, now_ms, unreadable, where,
--          priority, expire_ms, on_expire, unique_ms, unique_until_ms} where
-- state is 'delayed', 'processing' (state_ms = lease deadline), 'dead'
-- (state_ms = time of death), 'orphan' (a record in no set) or
-- 'unreadable'; or {'notfound'}.  unreadable is '' for a record that
-- reads, else why it does not (and then the fields are what could be
-- read of it: '' or 0 for the rest); where is the set the id is in
-- ('orphan' for none), for an unreadable record too; priority is the
-- job's level, 0..9 (5, normal, for an unreadable record); expire_ms is
-- when the job expires if it has not started (0: never) and on_expire
-- what then happens to it, 'dead' or 'drop' ('' when it never expires);
-- unique_ms the job's dedupe window (0: none) and unique_until_ms, for a
-- tombstone (state 'done': the job finished at state_ms, and its id stays
-- taken until unique_until_ms; the other fields are '' or 0; state
-- 'cancelled': the same for a job cancelled while it ran, with the fence
-- of the run that was stopped), when the window ends (0 for any other
-- state).
--
-- With form 'raw', a job in the normal level's delayed set, in a queue
-- without expiries or dedupe windows, is answered {'record', record,
-- due_ms, now_ms}: the record as stored (its head '3:<attempts>:' and
-- its body), undecoded, as claim gives records to workers, and due_ms
-- the score as ZSCORE gives it (a client truncates it to a whole number,
-- as Redis does with the number the path below returns).  The client
-- reads it by read_record's rules, and when it does not read, or the
-- reply is anything else, it is the reply as without the form: the client
-- asks again without it, and this script says what is wrong.
-- (libdelayq, the Python and the Node client call show so: a producer
-- following its jobs pays for the commands, not for a decoding and an
-- 18-element reply.  docs/protocol.md, "show".)
--
-- Without the form (the dashboard, the reaper, redis-cli), a readable
-- delayed job of normal priority, in a queue without expiries or dedupe
-- windows, costs its four commands and the record's decoding,
-- above the line where the prelude's functions are made.  Any other (a
-- bad id, a job elsewhere, a record that is not plainly readable) goes on
-- below it, where read_record says what is wrong with a record.
local id, form = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local us = t[2] + 0
local now = t[1] * 1000 + (us - us % 1000) / 1000
-- (An anchored pattern is one pass over the text; an unanchored search
-- tries a match at every byte.  Digits become a number by arithmetic:
-- tonumber is a global and a call.)
if id and #id <= 256 and find(id, '^[!-~]+$') and (form == nil or form == 'raw') then
  local type = type   -- a global: read once for its six calls
  local rk = KEYS[1]
  if find(id, '^%d+$') then rk = rk .. ':' .. sub(id, 1, -3) end
  local raw = redis.pcall('HGET', rk, id)
  if form and type(raw) == 'string' then
    local at = redis.call('ZSCORE', KEYS[2], id)
    local base = at and sub(KEYS[5], 1, -5)
    if at and redis.call('EXISTS', base .. 'expire_info', base .. 'unique') == 0 then
      return { 'record', raw, at, now }
    end
    raw = nil   -- the path below, whole
  end
  local a, body
  -- A head, and a body that is an array of six (the priority is normal).
  if type(raw) == 'string' then a, body = match(raw, '^3:(%d+):()\150') end
  if a and #a <= 10 then
    local at = redis.call('ZSCORE', KEYS[2], id)
    if at then
      -- The six elements after the array header (body is where it is,
      -- counted from 1: the offset, counted from 0, of the first), and
      -- nothing after them (left is -1); every one as read_record wants
      -- it, the error a string; else the path below.
      local ok, left, jt, p, m, c, o, e = pcall(cmsgpack.unpack_limit, raw, 6, body)
      a = a + 0
      if ok and left == -1 and type(jt) == 'string' and type(p) == 'string'
         and type(e) == 'string' and a <= MAX_ATTEMPTS
         and type(m) == 'number' and m % 1 == 0 and m >= 0 and m <= MAX_ATTEMPTS
         and type(c) == 'number' and c % 1 == 0 and c >= -MAX_EXACT and c <= MAX_EXACT
         and type(o) == 'number' and o % 1 == 0 and c + o >= -MAX_EXACT
         and c + o <= MAX_EXACT then
        -- A queue with expiries or windows: the path below reads them.
        local base = sub(KEYS[5], 1, -5)
        if redis.call('EXISTS', base .. 'expire_info', base .. 'unique') == 0 then
          return { 'delayed', jt, p, a, m, c, c + o, 0, e, at + 0, now, '',
                   'delayed', NORMAL, 0, '', 0, 0 }
        end
      end
    end
  end
end

-- prelude: here
id = arg_id(1, 'id')
if form ~= nil and form ~= 'raw' then arg_bad('form', form, "'raw'") end
if arg_fault then return arg_refusal('show') end
local raw = get_record(id)
if not raw then return { 'notfound' } end
local finished, until_ms, cfence = tombstone_of(raw)
if finished and until_ms <= now then return { 'notfound' } end   -- the reaper's to delete
if finished then
  local st = cfence and 'cancelled' or 'done'
  return { st, '', '', 0, 0, 0, 0, cfence or 0, '', finished, now, '', st, NORMAL, 0, '',
           until_ms - finished, until_ms }
end
local state, at = 'orphan', 0
local _, s = delayed_find(id)
if s then state, at = 'delayed', s else
  s = redis.call('ZSCORE', KEYS[3], id)
  if s then state, at = 'processing', s else
    s = redis.call('ZSCORE', KEYS[4], id)
    if s then state, at = 'dead', s end
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
           fence, part.err or '', tonumber(at), now, why, state, NORMAL, 0, '', 0, 0 }
end
local attempts = j.attempts
if state == 'processing' then attempts = attempts + 1 end
-- A dead job has no expiry left (it cannot start again unless requeued).
local expire, on_expire = nil, nil
if state ~= 'dead' then expire, on_expire = expiry_of(id, j.created) end
local u = redis.call('HGET', (unique_keys()), id)
local uc, uw = match(u or '', '^(%-?%d+) (%d+)$')
uw = uc and tonumber(uc) == j.created and tonumber(uw) or 0
return { state, j.type, j.payload, attempts, j.max, j.created, j.due,
         fence, j.err, tonumber(at), now, '', state, j.prio, expire or 0, on_expire or '',
         uw, 0 }
