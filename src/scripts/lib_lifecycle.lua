-- delayq script prelude, second part: what happens around a job's life
-- beyond its record and its sets (src/scripts/lib.lua, the first part, has
-- those): dedupe windows, debounce's next runs, expiries, giving held jobs
-- back, and the jobs a schedule fired ahead.  build-aux/embed-scripts.sh
-- puts the two parts together, this one after lib.lua, and prelude.awk
-- takes from them what each script uses.

-- ---- dedupe windows -----------------------------------------------------
-- A job added with a dedupe window (enqueue's unique_for, a producer's id
-- only) keeps its id taken for that long after it finished: acked,
-- cancelled or dropped at its expiry, the record's field is then a
-- tombstone, "U:<finished_ms>:<until_ms>", which enqueue's HSETNX finds
-- taken; a job that died keeps its record in dead, and its window runs
-- from its death when it is purged.  Two keys beside the queue's:
--   P:{Q}:unique        hash  id -> "<created_ms> <window_ms>", for the
--                             live job of that id created at created_ms
--   P:{Q}:unique_until  zset  id scored by its window's end, for each
--                             tombstone, so that the reaper deletes it
-- A queue without windows pays one EXISTS per ack call and per cancel.
local function unique_keys()
  local base = sub(KEYS[5], 1, -5)   -- KEYS[5] is P:{Q}:meta
  return base .. 'unique', base .. 'unique_until'
end

-- A cancel of a running job (cancel.lua) leaves a tombstone of its own,
-- "C:<cancelled_ms>:<until_ms>:<fence>": the id stays taken until the
-- cancelled run's lease would have ended (or its window, if later), so
-- that no new job of that id starts while that run may still be
-- stopping, and the fence names the run that was stopped.
--
-- A tombstone's finish time and window end, and for a cancelled run its
-- fence (else nil); nil when raw is none.
local function tombstone_of(raw)
  local k, f, u, rest = match(raw or '', '^([UC]):(%d+):(%d+)(.*)$')
  if k == 'U' and rest == '' then return tonumber(f), tonumber(u) end
  local fence = k == 'C' and match(rest, '^:(%d+)$')
  if fence then return tonumber(f), tonumber(u), tonumber(fence) end
  return nil
end

-- The tombstones that jobs `ids` leave as they finish, for those with a
-- window: reads only (their records raws when the caller read them, else
-- they are read here), and nil when none has one.  finished_at(i) is when
-- job i finished (default now).
local function unique_plan(ids, raws, finished_at)
  local uk = unique_keys()
  if #ids == 0 or redis.call('EXISTS', uk) == 0 then return nil end
  local e = redis.call('HMGET', uk, unpack(ids))
  local mine, at = {}, {}
  for i = 1, #ids do
    if e[i] then mine[#mine + 1], at[#at + 1] = ids[i], i end
  end
  if #mine == 0 then return nil end
  local r = {}
  if raws then for k = 1, #mine do r[k] = raws[at[k]] end else r = get_records(mine) end
  local now = now_ms()
  local plan = { gone = mine, ids = {}, recs = {}, zadd = {} }
  for k = 1, #mine do
    local c, w = match(e[at[k]], '^(%-?%d+) (%d+)$')
    local j = c and decode(r[k])
    local f = j and j.created == tonumber(c) and (finished_at and finished_at(at[k]) or now)
    if f and f + tonumber(w) > now then
      local n = #plan.ids + 1
      plan.ids[n] = mine[k]
      plan.recs[n] = format('U:%d:%d', f, f + tonumber(w))
      plan.zadd[2 * n - 1] = format('%d', f + tonumber(w))
      plan.zadd[2 * n] = mine[k]
    end
  end
  return plan
end

-- Write what unique_plan planned (after the caller's own writes).
local function unique_apply(plan)
  if not plan then return end
  local uk, zk = unique_keys()
  if #plan.ids > 0 then
    set_records(plan.ids, plan.recs)
    redis.call('ZADD', zk, unpack(plan.zadd))
  end
  redis.call('HDEL', uk, unpack(plan.gone))
end

-- Delete the tombstones whose window ended by `now` (at most `limit`).
local function unique_sweep(now, limit)
  local _, zk = unique_keys()
  local ids = redis.call('ZRANGE', zk, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids == 0 then return end
  local raws = get_records(ids)
  local over = {}
  for i = 1, #ids do
    local _, u = tombstone_of(raws[i])
    if u and u <= now then over[#over + 1] = ids[i] end
  end
  if #over > 0 then del_records(over) end
  redis.call('ZREM', zk, unpack(ids))
end

-- ---- debounce: a job's next run -----------------------------------------
-- A debounced add (enqueue's debounce_ms) of a job that is running cannot
-- change it: it is kept as the job's next run, in
--   P:{Q}:next  hash  id -> "<created_ms> <first_ms> <record>": the record
--                     of the next run (created at first_ms, its first
--                     add; due as the last add said), for the job of that
--                     id created at created_ms
-- When that job's attempt ends (acked, failed, dead, its lease expired,
-- or given back by release or recover), the next run takes its place: the
-- record, due at its own time or at once if that has passed (after a
-- lease expired: not before the retry would have been, since the old run
-- may still be under way), in its level's delayed set; a retry or a death
-- of the old payload gives way to the newer one.  A queue without
-- debounced adds pays nothing more than the EXISTS that ack shares with
-- the dedupe windows.
local function next_key()
  return sub(KEYS[5], 1, -5) .. 'next'   -- KEYS[5] is P:{Q}:meta
end

-- The next runs that take the place of jobs `ids` as their attempts end
-- (their records raws when the caller read them; not_before(i), when
-- given, the earliest the next run of ids[i] may be due): reads only; nil
-- when none has one.  plan.took[id] is true for each job that gives way.
-- A job whose record cannot be read loses its next run, logged: nothing
-- can tell whether the entry is its own.
local function next_plan(ids, raws, not_before)
  local nk = next_key()
  if #ids == 0 or redis.call('EXISTS', nk) == 0 then return nil end
  local v = redis.call('HMGET', nk, unpack(ids))
  local mine, at = {}, {}
  for i = 1, #ids do
    if v[i] then mine[#mine + 1], at[#at + 1] = ids[i], i end
  end
  if #mine == 0 then return nil end
  local r = {}
  if raws then for k = 1, #mine do r[k] = raws[at[k]] end else r = get_records(mine) end
  local now = now_ms()
  local plan = { gone = mine, ids = {}, recs = {}, adds = {}, took = {}, soonest = nil }
  for k = 1, #mine do
    local c, rec = match(v[at[k]], '^(%-?%d+) %d+ (.*)$')
    local old = c and decode(r[k])
    local j = old and old.created == tonumber(c) and decode(rec)
    if not old then
      redis.log(redis.LOG_WARNING, 'delayq: ' .. next_key() .. ': the next run of job '
                .. mine[k] .. ' is dropped: the job\'s record cannot be read')
    end
    if j then
      local earliest = not_before and not_before(at[k]) or now
      if j.due < earliest then j.due = earliest end
      local n = #plan.ids + 1
      plan.ids[n], plan.recs[n] = mine[k], encode(j)
      add_to(plan.adds, j.prio, format('%d', j.due), mine[k])
      plan.took[mine[k]] = true
      if plan.soonest == nil or j.due < plan.soonest then plan.soonest = j.due end
    end
  end
  if plan.soonest then plan.before = head_due_all() end
  return plan
end

-- Write what next_plan planned, after the caller's own writes (which leave
-- the jobs that give way out of every set), and tell `channel` (nil: the
-- queue's wake channel, named after its keys; '': no one).
local function next_apply(plan, channel)
  if not plan then return end
  if #plan.ids > 0 then
    set_records(plan.ids, plan.recs)
    delayed_add(plan.adds)
    wake_if_sooner(channel or sub(KEYS[5], 1, -5) .. 'wake', plan.before, plan.soonest)
  end
  redis.call('HDEL', next_key(), unpack(plan.gone))
end

-- ---- expiry ------------------------------------------------------------
-- A job may carry an expiry (enqueue's expire_at): when it has not
-- started by then, it is not run.  Its record does not change (older
-- readers read it as before): two keys beside the queue's, with its hash
-- tag, hold the expiries, and cost a queue that has none one ZRANGE per
-- claim and per reap.
--   P:{Q}:expire_at    zset  id scored by expiry time (ms)
--   P:{Q}:expire_info  hash  id -> "<expire_ms> <created_ms> <dead|drop>"
-- An entry belongs to the job of that id created at created_ms: a job
-- that finished (acked, cancelled, dead) leaves its entry behind, and the
-- entry is dropped when its time comes and it finds no such job waiting.
local function expiry_keys()
  local base = sub(KEYS[5], 1, -5)   -- KEYS[5] is P:{Q}:meta
  return base .. 'expire_at', base .. 'expire_info'
end

-- An expire_info value: the expiry, the job's created_ms and the mode, or
-- nil when it is not one.
local function expiry_parse(v)
  local e, c, mode = match(v or '', '^(%d+) (%-?%d+) (%a+)$')
  if e then return tonumber(e), tonumber(c), mode end
  return nil
end

-- Whether `ex` may be the expiry of a job due at `due`: after it, and at
-- most 200 years from now (a due time up to 100 years ahead, then a ttl
-- of up to 100 years).
local function expiry_fits(ex, due, now)
  return ex and ex > due and ex <= now + 2 * MAX_AHEAD_MS
end

-- Take the entries of jobs `ids` away (a requeue: an operator's "run it").
local function expiry_clear(ids)
  local zk, hk = expiry_keys()
  redis.call('ZREM', zk, unpack(ids))
  redis.call('HDEL', hk, unpack(ids))
end

-- Give job `id` (created at `created`) an expiry, or take its entry away
-- when expire is nil.
local function expiry_set(id, expire, created, mode)
  local zk, hk = expiry_keys()
  if expire then
    redis.call('ZADD', zk, format('%d', expire), id)
    redis.call('HSET', hk, id, format('%d %d %s', expire, created, mode))
  else
    redis.call('ZREM', zk, id)
    redis.call('HDEL', hk, id)
  end
end

-- The expiry of job `id` created at `created`: its time and what happens
-- then ('dead' or 'drop'), or nil when it has none.
local function expiry_of(id, created)
  local _, hk = expiry_keys()
  local e, c, mode = expiry_parse(redis.call('HGET', hk, id))
  if e and c == created then return e, mode end
  return nil
end

-- Jobs past their expiry that have not started (waiting in a delayed
-- set, first or for a retry) leave it: to dead with the error 'expired',
-- attempts unchanged, or deleted (mode drop); meta's `jobs_expired` counts
-- both.  A job running then keeps its entry, moved to its lease deadline
-- (a second on, when that has passed: the reaper has yet to act), and
-- back to its own time by expiry_rearm should the job return to a delayed
-- set: the retry is not run.  At most `limit` entries a call.  Returns
-- how many jobs expired, and whether entries past their time may be left
-- (limit reached).  Reads everything before its first write, and is a
-- whole step: claim and reap call it first, and read for their own work
-- after it (should such a read fail, what it did stands).
local function expire_due(now, limit)
  local zk, hk = expiry_keys()
  local ids = redis.call('ZRANGE', zk, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  local n = #ids
  local expired = 0
  if n > 0 then
    local info = redis.call('HMGET', hk, unpack(ids))
    local raws = get_records(ids)
    local gone, moves, bury, drop, recs = {}, {}, {}, {}, {}
    local drop_raws = {}
    local out = {}   -- per delayed set, the ids that leave it
    for i = 1, n do
      local id = ids[i]
      local _, c, mode = expiry_parse(info[i])
      local j = c and decode(raws[i])
      local key = j and j.created == c and delayed_find(id)
      if key then
        local o = out[key]
        if not o then o = {}; out[key] = o end
        o[#o + 1] = id
        if mode == 'drop' then
          drop[#drop + 1] = id
          drop_raws[#drop_raws + 1] = raws[i]
        else
          j.err = 'expired'
          bury[#bury + 1] = id
          recs[#recs + 1] = encode(j)
        end
        gone[#gone + 1] = id
      else
        local deadline = j and j.created == c and redis.call('ZSCORE', KEYS[3], id)
        if deadline then
          -- At its deadline, or in a second when that has passed (the
          -- reaper has yet to give the job back): not at once again.
          deadline = tonumber(deadline)
          moves[#moves + 1] = format('%d', deadline > now and deadline + 1 or now + 1000)
          moves[#moves + 1] = id
        else
          gone[#gone + 1] = id
        end
      end
    end
    -- A dropped job with a dedupe window leaves its tombstone.
    local tombs = unique_plan(drop, drop_raws)
    if #bury > 0 then set_records(bury, recs) end
    if #drop > 0 then del_records(drop) end
    unique_apply(tombs)
    for key, o in pairs(out) do redis.call('ZREM', key, unpack(o)) end
    if #bury > 0 then
      local z = {}
      for i = 1, #bury do z[2 * i - 1] = now; z[2 * i] = bury[i] end
      redis.call('ZADD', KEYS[4], unpack(z))
    end
    if #moves > 0 then redis.call('ZADD', zk, unpack(moves)) end
    if #gone > 0 then
      redis.call('ZREM', zk, unpack(gone))
      redis.call('HDEL', hk, unpack(gone))
    end
    expired = #bury + #drop
    if expired > 0 then redis.call('HINCRBY', KEYS[5], 'jobs_expired', expired) end
  end
  return expired, n == limit
end

-- Jobs going back to a delayed set (a retry, a release) whose expiry
-- expire_due moved to their lease deadline while they ran: their entries
-- are due again at their own time, so that the claim that would start
-- them ends them first when it has passed.  expiry_again reads (the ZADD
-- arguments for ids and their decoded jobs), expiry_rearm writes them.
local function expiry_again(ids, jobs)
  local _, hk = expiry_keys()
  local info = redis.call('HMGET', hk, unpack(ids))
  local args = {}
  for i = 1, #ids do
    local e, c = expiry_parse(info[i])
    if e and jobs[i] and c == jobs[i].created then
      args[#args + 1] = format('%d', e)
      args[#args + 1] = ids[i]
    end
  end
  return args
end

local function expiry_rearm(args)
  if #args > 0 then redis.call('ZADD', (expiry_keys()), unpack(args)) end
end

-- Put held jobs (ids, with their records raws, read before any write)
-- back in the queue without counting an attempt: out of processing and the
-- lease hash, into delayed at the due time their record keeps, so each
-- runs next, on another worker.  A record that cannot be read goes to dead
-- (nothing could run it); a missing one is dropped and counted (see
-- note_orphans).  A job with a next run (a debounced add while it ran)
-- gives way to it: the run it was given back from was its last.  Wakes
-- sleeping workers.  release and recover share it.
local function give_back(channel, held, raws)
  local before = head_due_all()
  local now = now_ms()
  local zadd, bury, orphans, soonest = {}, {}, {}, nil
  local jobs = {}
  for i = 1, #held do jobs[i] = decode(raws[i]) or false end
  local rearm = expiry_again(held, jobs)
  local nexts = next_plan(held, raws)   -- a job with a next run gives way
  for i = 1, #held do
    local j = jobs[i]
    if nexts and nexts.took[held[i]] then
      -- It gives way to its next run (next_apply below).
    elseif j then
      add_to(zadd, j.prio, j.due, held[i])
      if soonest == nil or j.due < soonest then soonest = j.due end
    elseif raws[i] then
      bury[#bury + 1] = now
      bury[#bury + 1] = held[i]
    else
      orphans[#orphans + 1] = held[i]
    end
  end
  redis.call('ZREM', KEYS[3], unpack(held))
  redis.call('HDEL', KEYS[6], unpack(held))
  if soonest then
    delayed_add(zadd)
    expiry_rearm(rearm)
    wake_if_sooner(channel, before, soonest)
  end
  if #bury > 0 then redis.call('ZADD', KEYS[4], unpack(bury)) end
  note_orphans(orphans, 3)
  next_apply(nexts, channel)
end

-- ---- schedules (KEYS[7] schedules, KEYS[8] schedule_due) ---------------
-- A paused schedule (sched_pause) keeps its definition, its score in
-- schedule_due at SCHED_PAUSED (no tick is ever that late, so no daemon
-- fires it, and it still counts among the queue's schedules) and, in the
-- field NAME@paused, the Unix ms it was paused at.
local SCHED_PAUSED = 9007199254740991
local function sched_paused_field(name) return name .. '@paused' end

-- The jobs schedule `name` fired ahead of their ticks and that still wait
-- for them at `now`, as {id, tick, id, tick, ...}: sched_fire lists them,
-- as "ID TICK" pairs separated by spaces, in the field NAME@ of the
-- schedules hash (no schedule's name has an '@'), and sched_remove and
-- sched_pause delete them.  A job no longer due at its own tick has run
-- (a retry waits for its backoff) or was rescheduled: it is not the
-- schedule's to take back.
local function fired_ahead(name, now)
  local out = {}
  local list = redis.call('HGET', KEYS[7], name .. '@') or ''
  for id, tick in string.gmatch(list, '(%S+) (%d+)') do
    local due = redis.call('ZSCORE', KEYS[2], id)
    if due and due == tick and tonumber(tick) > now then
      out[#out + 1] = id
      out[#out + 1] = tick
    end
  end
  return out
end

-- Delete the jobs schedule `name` fired ahead of ticks not yet due (see
-- fired_ahead), and their list: sched_remove and sched_pause.
local function take_back_ahead(name, now)
  local ahead, ids = fired_ahead(name, now), {}
  for i = 1, #ahead, 2 do ids[#ids + 1] = ahead[i] end
  if #ids > 0 then
    del_records(ids)
    redis.call('ZREM', KEYS[2], unpack(ids))
  end
  redis.call('HDEL', KEYS[7], name .. '@')
end
