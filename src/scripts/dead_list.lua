#!lua flags=no-writes
-- dead_list: a page of the dead-letter set, oldest death first.
-- ARGV: offset, count
-- Returns {total, then per job: id, died_ms, type, attempts, last_error,
--          payload_bytes}
local ids = redis.call('ZRANGE', KEYS[4], tonumber(ARGV[1]),
  tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out = { redis.call('ZCARD', KEYS[4]) }
if #ids == 0 then return out end
local names = {}
for i = 1, #ids, 2 do names[#names + 1] = ids[i] end
local raws = get_records(names)
for i = 1, #names do
  local j = decode(raws[i]) or { type = '?', attempts = 0, err = 'unreadable record', payload = '' }
  out[#out + 1] = names[i]
  out[#out + 1] = tonumber(ids[2 * i])
  out[#out + 1] = j.type
  out[#out + 1] = j.attempts
  out[#out + 1] = j.err
  out[#out + 1] = #j.payload
end
return out
