-- Round 2 of a fenced acquisition (DESIGN.md §5): raise this master's
-- counter to the fence t, but only while the lock key still holds our token.
-- Success means the stored counter is t under our token; the owner breaks
-- ties, so a counter already at t counts only if it is ours.
-- KEYS[1] lock key; KEYS[2] fence key. ARGV[1] token; ARGV[2] t (decimal).
-- Returns 1 on success, 0 otherwise.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local c = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
local t = tonumber(ARGV[2])
if c < t then
  redis.call('HSET', KEYS[2], 'fence', ARGV[2], 'owner', ARGV[1])
  return 1
end
if c == t and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
  return 1
end
return 0
