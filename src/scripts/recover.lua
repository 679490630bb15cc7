-- recover: give back the jobs of a claim whose worker died before it could
-- list them (the claim's reply was still on its way).  A claim that names
-- its worker (claim's owner argument) records the fences it handed out
-- under that name in the meta hash; every job still held under one of
-- them goes back to the queue as release does: no attempt counted, due
-- time kept.  The supervisor runs this after settling what the worker did
-- list, so what is still held under those fences was never started.
-- ARGV: wake_channel, owner
-- Returns the number of jobs given back.  The owner's record is removed.
local channel = arg_str(1, 'wake_channel')
local owner = ARGV[2]
if not owner or not is_plain(owner, 200) then
  arg_bad('owner', owner, 'a name (1..200 printable bytes, no spaces)')
end
if #ARGV > 2 then arg_bad('arguments', tostring(#ARGV), 'two') end
if arg_fault then return arg_refusal('recover') end
local field = 'claim:' .. owner
local range = redis.call('HGET', KEYS[5], field)
if not range then return 0 end
local lo, n = match(range, '^(%d+) (%d+)$')
lo, n = tonumber(lo), tonumber(n)
local held = {}
if lo then
  local all = redis.call('HGETALL', KEYS[6])
  for i = 1, #all, 2 do
    local f = tonumber(all[i + 1])
    if f and f > lo and f <= lo + n and all[i] ~= PIN then held[#held + 1] = all[i] end
  end
end
local raws = #held > 0 and get_records(held)  -- reads first (see the prelude)
redis.call('HDEL', KEYS[5], field)
if #held > 0 then give_back(channel, held, raws) end
return #held
