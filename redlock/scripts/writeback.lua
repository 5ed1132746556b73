-- Round 2 of a fenced acquisition (DESIGN.md §5): raise this master's
-- counter to the fence t, but only while the lock key still holds our token.
-- Success means the stored counter is t under our token; the owner breaks
-- ties, so a counter already at t counts only if it is ours.
-- KEYS[1] lock key; KEYS[2] fence key. ARGV[1] token; ARGV[2] t (decimal).
-- Returns 1 on success, 0 otherwise.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
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
-- (The same two functions are in fenced_write.lua; keep them alike.)
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
