-- Round 2 of a fenced acquisition (docs/design.md §5): raise this master's
-- counter to the fence t, but only while the lock key still holds our token.
-- Success means the stored counter is t under our token; the owner breaks
-- ties, so a counter already at t counts only if it is ours.
-- KEYS[1] lock key; KEYS[2] fence key. ARGV[1] token; ARGV[2] t (decimal).
-- Returns 1 on success, 0 otherwise.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- dec and cmp come from decimal.lua, prepended.
local c = dec(redis.call('HGET', KEYS[2], 'fence') or '0')
local t = dec(ARGV[2])
if not c or not t then
  return redis.error_reply('ERR redlock write-back: a fence is not a decimal number')
end
local order = cmp(c, t)
if order < 0 then
  redis.call('HSET', KEYS[2], 'fence', ARGV[2], 'owner', ARGV[1])
  return 1
end
if order == 0 and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
  return 1
end
return 0
