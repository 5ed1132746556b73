-- Round 1 of an acquisition of several resources at once (TryLockAll):
-- all of them or none, atomically on this master. SET NX PX every lock
-- key when none exists; with fencing, read their fence counters too.
-- KEYS[1..n] the lock keys; with fencing, KEYS[n+1..2n] their fence
-- counters (each in its lock key's hash slot).
-- ARGV[1] token; ARGV[2] TTL in milliseconds; ARGV[3] n; ARGV[4] "1" to
-- read the fence counters.
-- Returns the largest fence counter as a decimal string ("0" without
-- fencing or counters), or nil when any of the keys is held. dec and cmp
-- come from decimal.lua, prepended.
local n = tonumber(ARGV[3])
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return false
  end
end
local top = '0'
if ARGV[4] == '1' then
  for i = 1, n do
    local c = dec(redis.call('HGET', KEYS[n + i], 'fence') or '0')
    if not c then
      return redis.error_reply('ERR redlock acquire: a fence counter is not a decimal number')
    end
    if cmp(c, top) > 0 then
      top = c
    end
  end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return top
