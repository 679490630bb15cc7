-- requeue: give dead jobs a new life, due now with their attempts reset;
-- the last error and the priority are kept.
-- ARGV: wake_channel, id ('' = the oldest `batch` dead jobs), batch
--       (1..10000)
-- A requeued job has no expiry (see the prelude): the operator asks that
-- it run.
-- Returns {moved, remaining_dead}; moved is 0 when the id is not dead.  A
-- record that cannot be read cannot run: it stays dead (filed again as of
-- now, so that a requeue of all moves on past it); a dead id without a
-- record is dropped and counted in meta's orphans_removed.
local channel = arg_str(1, 'wake_channel')
local id = arg_id(2, 'id', true)
local batch = arg_int(3, 'batch', 1, 10000)
if arg_fault then return arg_refusal('requeue') end
local ids = dead_pick(id, batch)
if not ids then return { 0, redis.call('ZCARD', KEYS[4]) } end
local moved = 0
if #ids > 0 then
  local now = now_ms()
  local raws = get_records(ids)         -- reads first (see the prelude)
  local before = head_due_all()
  local back, recs, zadd, unreadable, orphans = {}, {}, {}, {}, {}
  for i, job in ipairs(ids) do
    local j = decode(raws[i])
    if j then
      j.attempts = 0
      j.due = now
      back[#back + 1] = job
      recs[#recs + 1] = encode(j)
      add_to(zadd, j.prio, now, job)
      moved = moved + 1
    elseif raws[i] then
      unreadable[#unreadable + 1] = now
      unreadable[#unreadable + 1] = job
    else
      orphans[#orphans + 1] = job
    end
  end
  if moved > 0 then
    set_records(back, recs)
    expiry_clear(back)
  end
  redis.call('ZREM', KEYS[4], unpack(ids))
  if #unreadable > 0 then redis.call('ZADD', KEYS[4], unpack(unreadable)) end
  if moved > 0 then
    delayed_add(zadd)
    wake_if_sooner(channel, before, now)
  end
  note_orphans(orphans, 4)
end
return { moved, redis.call('ZCARD', KEYS[4]) }
