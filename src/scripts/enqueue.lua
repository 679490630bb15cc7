-- enqueue: create a job record and schedule it.
-- ARGV: wake_channel, id ('' = generate), type, payload, when ('delay'|'at'),
--       ms (delay, or absolute Unix ms for 'at'), max_attempts (0 = the
--       consumer's default), replace ('1' = reschedule an existing job),
--       optional priority (0..9, 0 the most urgent; absent = 5, normal),
--       then, for a partitioned queue, partitions N (1..256) and this
--       partition p (0..N-1): a generated id is then seq * N + p, so that
--       its number mod N names its partition (absent: N = 1, the id is seq)
-- Returns {status, id, due_ms, now_ms}; status is 'ok', 'replaced',
-- 'exists' (id taken and replace not asked) or 'running' (a job with this
-- id is being processed: it cannot be replaced under its worker).
-- A delay is 0..100 years, an absolute time 0..now + 100 years; any other
-- argument error is refused before anything is written.
local now = now_ms()
local channel = arg_str(1, 'wake_channel')
local id = arg_id(2, 'id', true)
if match(id, '^%d+$') then
  arg_bad('id', id, 'a producer id (all digits are kept for generated ids)')
elseif id == '.' or id == '..' then
  arg_bad('id', id, "a producer id (not '.' or '..', which URLs cannot name)")
end
local jtype = ARGV[3]
if not (jtype and is_plain(jtype, 128) and jtype ~= '*') then
  arg_bad('type', jtype, "a job type (1..128 printable bytes, no spaces, not '*')")
end
local payload = arg_str(4, 'payload')
local when = arg_one_of(5, 'when', 'delay', 'at')
local due
if when == 'at' then
  due = arg_int(6, 'at_ms', 0, now + MAX_AHEAD_MS)
else
  due = now + arg_int(6, 'delay_ms', 0, MAX_AHEAD_MS)
end
local max = arg_int(7, 'max_attempts', 0, MAX_ATTEMPTS)
local replace = arg_one_of(8, 'replace', '0', '1') == '1'
local prio = NORMAL
if ARGV[9] then prio = arg_int(9, 'priority', 0, 9) end
local nparts, part = 1, 0
if ARGV[10] then
  nparts = arg_int(10, 'partitions', 1, 256)
  part = arg_int(11, 'partition', 0, nparts - 1)
end
if #ARGV > 11 then arg_bad('argument 12', ARGV[12], 'expected: enqueue takes at most 11') end
if arg_fault then return arg_refusal('enqueue') end

local status = 'ok'
if id == '' then
  -- Generated ids are decimal; producers' own ids may not be all digits.
  repeat
    id = format('%d', redis.call('HINCRBY', KEYS[5], 'seq', 1) * nparts + part)
  until not get_record(id)
elseif get_record(id) then
  if not replace then return { 'exists', id, 0, now } end
  if redis.call('ZSCORE', KEYS[3], id) then return { 'running', id, 0, now } end
  status = 'replaced'
end

local before = head_due_all()
local was = status == 'replaced' and delayed_find(id)
set_record(id, encode({ type = jtype, payload = payload, attempts = 0,
  max = max, created = now, due = due, err = '', prio = prio }))
if status == 'replaced' then redis.call('ZREM', KEYS[4], id) end
if was and was ~= level_key(prio) then redis.call('ZREM', was, id) end
delayed_add({ [prio] = { due, id } })
wake_if_sooner(channel, before, due)
return { status, id, due, now }
