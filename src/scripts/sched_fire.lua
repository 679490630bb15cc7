-- sched_fire: fire one tick of a recurring schedule and advance it, in one
-- step, so that every tick makes exactly one job however many daemons
-- race for it.  Keys as sched_add.
-- ARGV: wake_channel, name, expected_ms, tick_ms, id, next_ms
--   expected_ms  the fire time the caller read from schedule_due; nothing
--                happens unless the schedule still has it (another daemon
--                fired it first, or it was removed or replaced), or '-' to
--                fire without checking or advancing (run-now)
--   tick_ms      the due time of the job to make, or -1 for none (a tick
--                skipped by the catch-up policy)
--   id           the job's id: the name, '@', the tick (NAME@2026-11-23T
--                10:05:00Z); a job that has it already is left as it is
--   next_ms      the schedule's next fire time (computed by the caller)
-- The job is an ordinary delayed job due at tick_ms, of the schedule's
-- type, payload and max_attempts.
-- Returns {status, id}: status 'fired', 'exists' (the job is there
-- already), 'advanced' (no tick fired, the schedule moved on), 'stale'
-- (the schedule has moved on, or is gone: nothing written) or 'missing'
-- (no schedule of that name: nothing written).
local now = now_ms()
local channel = arg_str(1, 'wake_channel')
local name = ARGV[2]
if not (name and is_plain(name, 128) and not find(name, '@')) then
  arg_bad('name', name, "a schedule name (1..128 printable bytes, no spaces, no '@')")
end
local expected = ARGV[3]
if expected ~= '-' then expected = arg_int(3, 'expected_ms', 0, MAX_EXACT) end
local tick = arg_int(4, 'tick_ms', -1, now + MAX_AHEAD_MS)
local id = arg_id(5, 'id', false)
if name and sub(id, 1, #name + 1) ~= name .. '@' then
  arg_bad('id', id, 'the schedule name followed by @')
end
local next_fire = arg_int(6, 'next_ms', 0, now + MAX_AHEAD_MS)
if arg_fault then return arg_refusal('sched_fire') end

local raw = redis.call('HGET', KEYS[7], name)
if not raw then return { 'missing', id } end
if expected ~= '-' then
  local score = redis.call('ZSCORE', KEYS[8], name)
  if not score or tonumber(score) ~= expected then return { 'stale', id } end
end
local s = nil
if sub(raw, 1, 2) == '1:' then
  local ok, d = pcall(cmsgpack.unpack, sub(raw, 3))
  if ok and type(d) == 'table' and type(d[3]) == 'string' and type(d[4]) == 'string'
     and is_int(d[5]) then
    s = d
  end
end
if not s then
  return redis.error_reply('ERR delayq: sched_fire: schedule ' .. name
                           .. ' has an unreadable definition')
end

-- A job fired ahead of its tick joins the schedule's list of them (see
-- fired_ahead), which drops those now due, running or gone, so that
-- sched_remove can take it back.
local function note_ahead(job)
  local keep = fired_ahead(name, now)
  keep[#keep + 1] = job
  keep[#keep + 1] = format('%d', tick)
  redis.call('HSET', KEYS[7], name .. '@', table.concat(keep, ' '))
end

local status = 'advanced'
if tick >= 0 then
  status = 'exists'
  if not get_record(id) then
    status = 'fired'
    local before = head_due(KEYS[2])
    set_record(id, encode({ type = s[3], payload = s[4], attempts = 0, max = s[5],
      created = now, due = tick, err = '' }))
    redis.call('ZADD', KEYS[2], tick, id)
    wake_if_sooner(channel, before, tick)
    if expected ~= '-' and tick > now then note_ahead(id) end
  end
end
if expected ~= '-' then redis.call('ZADD', KEYS[8], next_fire, name) end
return { status, id }
