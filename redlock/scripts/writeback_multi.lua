-- Round 2 of a fenced acquisition of several resources: raise every fence
-- counter to t, but only while every lock key still holds our token, and
-- only if no counter is already past t (or at t under another owner).
-- All or nothing: every check comes before any write.
-- KEYS[1..n] the lock keys; KEYS[n+1..2n] their fence counters.
-- ARGV[1] token; ARGV[2] t (decimal); ARGV[3] n.
-- Returns 1 on success, 0 otherwise. dec and cmp come from decimal.lua,
-- prepended.
local n = tonumber(ARGV[3])
local t = dec(ARGV[2])
if not t then
  return redis.error_reply('ERR redlock write-back: a fence is not a decimal number')
end
local raise = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
  local c = dec(redis.call('HGET', KEYS[n + i], 'fence') or '0')
  if not c then
    return redis.error_reply('ERR redlock write-back: a fence counter is not a decimal number')
  end
  local order = cmp(c, t)
  if order > 0 or (order == 0 and redis.call('HGET', KEYS[n + i], 'owner') ~= ARGV[1]) then
    return 0
  end
  raise[i] = order < 0
end
for i = 1, n do
  if raise[i] then
    redis.call('HSET', KEYS[n + i], 'fence', ARGV[2], 'owner', ARGV[1])
  end
end
return 1
