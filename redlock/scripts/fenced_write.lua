-- A fenced write to a resource kept in Redis: accept the value only if its
-- fence is larger than the highest fence accepted so far, or equal to it
-- AND from the same owner (the same holder writing again). Anything else is
-- a stale holder — one whose lock was lost and taken over — and is rejected.
-- Checking the owner on an equal fence matters when fences can repeat (a
-- lock master restarted empty): two holders with one fence are not both
-- let through.
-- KEYS[1] the resource (a hash: value, fence, owner).
-- ARGV[1] fence; ARGV[2] owner: the hex SHA-256 of the lock's token (never
-- the token itself, which would let readers of the resource take the lock's
-- keys); ARGV[3] value.
-- Returns 1 when accepted, 0 when rejected as stale. dec and cmp come from
-- decimal.lua, prepended.
local last = dec(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = dec(ARGV[1])
if not last or not fence then
  return redis.error_reply('ERR redlock fenced write: a fence is not a decimal number')
end
local order = cmp(fence, last)
if order < 0 then
  return 0
end
if order == 0 and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'owner', ARGV[2], 'value', ARGV[3])
return 1
