#!lua flags=no-writes
-- dead_list: a page of the dead-letter set, oldest death first.
-- ARGV: offset (0 or more), count (1..10000)
-- Returns {total, then per job: id, died_ms, type, attempts, last_error,
--          payload_bytes, unreadable}
-- unreadable is '' for a record that reads, else why it does not; an
-- unreadable record shows what could be read of it ('' or 0 for the rest)
-- and never fails the page.
local offset = arg_int(1, 'offset', 0, MAX_EXACT)
local count = arg_int(2, 'count', 1, 10000)
if arg_fault then return arg_refusal('dead_list') end
local ids = redis.call('ZRANGE', KEYS[4], offset, offset + count - 1, 'WITHSCORES')
local out = { redis.call('ZCARD', KEYS[4]) }
if #ids == 0 then return out end
local names = {}
for i = 1, #ids, 2 do names[#names + 1] = ids[i] end
local raws = get_records(names)
for i = 1, #names do
  local j, why, part = read_record(raws[i])
  j = j or { type = part.type or '', attempts = part.attempts or 0,
             err = part.err or '', payload = part.payload or '' }
  local o = #out
  out[o + 1] = names[i]
  out[o + 2] = tonumber(ids[2 * i])
  out[o + 3] = j.type
  out[o + 4] = j.attempts
  out[o + 5] = j.err
  out[o + 6] = #j.payload
  out[o + 7] = why or ''
end
return out
