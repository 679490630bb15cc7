-- enqueue_many: enqueue's work for several jobs of one queue in one call,
-- with one command per batch rather than per job (libdelayq's dq_enqueue_many).
-- The client sends each record's body already encoded, so that the script
-- only stamps the times on it: this is the bulk producer's hot path.
-- ARGV: wake_channel, then per job three arguments:
--   id    '' = generate one
--   when  a delay in ms ("5000"), or "@" and an absolute Unix time in ms
--         ("@1767225600000"); an "r" in front of either ("r5000") replaces
--         a job of that id that is not running
--   body  the record body's MessagePack up to its times: an array header
--         of 6, then type, payload and max_attempts.  The script appends
--         created_ms, due_ms - created_ms and an empty last_error.
-- Returns {now_ms, seq, then per exception: index, status, id}.  Jobs are
-- 'ok' with the id the client sent, a delay's due time being now_ms + delay,
-- and the k-th job sent without an id (counting from 1) getting seq + k;
-- the exceptions (1-based index) are the jobs with another status, as
-- enqueue's, or with a generated id drawn again because a producer's
-- record held it.  A short reply: the client knows the rest.
local now = now_ms()
local n = (#ARGV - 1) / 3
local tonumber, pack = tonumber, cmsgpack.pack

-- Every argument is read before anything is written: a malformed one
-- leaves the queue untouched.
local ids, dues, replace, generated, seq = {}, {}, {}, 0, 0
for i = 1, n do
  local id, when = ARGV[3 * i - 1], ARGV[3 * i + 0]
  local due = tonumber(when)
  if due then
    due = now + due
  else
    local r, at, ms = match(when, '^(r?)(@?)(%d+)$')
    if not ms then
      return redis.error_reply('enqueue_many: job ' .. i .. ' has a bad time "' .. when .. '"')
    end
    due = tonumber(ms)
    if at == '' then due = now + due end
    replace[i] = r == 'r'
  end
  dues[i] = due
  ids[i] = id
  if id == '' then generated = generated + 1 end
end

-- Generated ids come from one counter increment for the whole batch.
if generated > 0 then
  seq = redis.call('HINCRBY', KEYS[5], 'seq', generated) - generated
  local next_id = seq
  for i = 1, n do
    if ids[i] == '' then
      next_id = next_id + 1
      ids[i] = format('%d', next_id)
    end
  end
end
local found = get_records(ids)
local taken = {}
for i = 1, n do if found[i] then taken[ids[i]] = true end end

local before = head_due(KEYS[2])
-- created_ms is the same for the whole batch, and many jobs share a due
-- time: encode each once.  Scores go to ZADD as integer strings: a number
-- handed to redis.call is formatted with "%.17g", a cost per job.
local tail_created = pack(now)
local last_due, last_tail, last_score = nil, nil, nil
local out = { now, seq }
local new_ids, recs, zadd, undead = {}, {}, {}, {}
local soonest = nil
for i = 1, n do
  local id = ids[i]
  local status = 'ok'
  if taken[id] then
    if ARGV[3 * i - 1] == '' then
      -- A generated id that a record holds already: draw again.
      repeat
        id = format('%d', redis.call('HINCRBY', KEYS[5], 'seq', 1))
      until not get_record(id) and not taken[id]
    elseif not replace[i] then
      status = 'exists'
    elseif redis.call('ZSCORE', KEYS[3], id) then
      status = 'running'
    else
      undead[#undead + 1] = id
      status = 'replaced'
    end
  end
  if status == 'ok' or status == 'replaced' then
    local due = dues[i]
    if due ~= last_due then
      last_due, last_tail = due, tail_created .. pack(due - now) .. '\160'
      last_score = format('%d', due)
    end
    local h = #new_ids + 1
    new_ids[h] = id
    recs[h] = '3:0:' .. ARGV[3 * i + 1] .. last_tail
    zadd[2 * h - 1] = last_score
    zadd[2 * h] = id
    taken[id] = true
    if soonest == nil or due < soonest then soonest = due end
  end
  if status ~= 'ok' or id ~= ids[i] then
    local o = #out
    out[o + 1] = i
    out[o + 2] = status
    out[o + 3] = id
  end
end
if #new_ids > 0 then
  -- Records first, then the sets: if a bucket cannot be reached (see the
  -- prelude), nothing has changed.
  set_records(new_ids, recs)
  if #undead > 0 then redis.call('ZREM', KEYS[4], unpack(undead)) end
  redis.call('ZADD', KEYS[2], unpack(zadd))
  wake_if_sooner(ARGV[1], before, soonest)
end
return out
