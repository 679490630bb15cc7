-- release: give back claimed jobs that were never started (a worker that is
-- stopping returns the rest of its batch).  The attempt is not counted and
-- the job keeps its due time, so it runs next, on another worker.
-- ARGV: wake_channel, id1, fence1, id2, fence2, ...
-- Returns the number of jobs released; a pair whose fence is stale is
-- skipped (the job was reaped meanwhile).  A released job whose record
-- cannot be read goes to dead instead (nothing could run it); one without
-- a record is dropped and counted in meta's orphans_removed.
local channel = arg_str(1, 'wake_channel')
if #ARGV < 3 or (#ARGV - 1) % 2 ~= 0 then
  arg_bad('arguments', tostring(#ARGV), 'a wake channel and pairs of id and fence')
end
if arg_fault then return arg_refusal('release') end
local n = (#ARGV - 1) / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local fences = redis.call('HMGET', KEYS[6], unpack(ids))
local held = {}
for i = 1, n do
  if fences[i] and fences[i] == ARGV[2 * i + 1] and ids[i] ~= PIN then
    held[#held + 1] = ids[i]
  else
    arg_id(2 * i, 'id ' .. i)
    arg_int(2 * i + 1, 'fence ' .. i, 0, MAX_EXACT)
  end
end
if arg_fault then return arg_refusal('release') end
if #held == 0 then return 0 end
-- The record is as the claim found it: its due time is still the job's.
give_back(channel, held, get_records(held))
return #held
