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
-- Returns 1 when accepted, 0 when rejected as stale.
-- Fences are uint64s, passed and stored as decimal strings, and compared
-- as such: tonumber would make them doubles, exact only up to 2^53 (2^53
-- and 2^53+1 are one double, as are all fences near 2^64). dec reads a
-- stored or passed fence (leading zeros dropped, so "" or "0" is zero; nil
-- if it is not a decimal number); cmp orders two such strings exactly: the
-- longer is larger, and equal lengths go digit by digit. Bytes, not '<':
-- Lua 5.1 orders strings with strcoll, that is by the server's locale.
local function dec(s)
  if not string.match(s, '^%d*$') then
    return nil
  end
  s = string.gsub(s, '^0+', '')
  if s == '' then
    return '0'
  end
  return s
end
local function cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end
-- (The same two functions are in writeback.lua; keep them alike.)
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
