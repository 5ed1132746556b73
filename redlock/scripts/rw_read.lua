-- A read lock on one master (docs/design.md §19). Acquire (ARGV[3] "a"):
-- register the reader where no writer holds the writer key and no writer
-- waits (its intent key). Extend ("e"): move a live reader's expiry. Both
-- expire readers by this master's clock (TIME), as PEXPIRE would.
-- KEYS[1] writer key; KEYS[2] intent key; KEYS[3] the readers (a sorted
-- set: token -> expiry in this master's ms).
-- ARGV[1] token; ARGV[2] TTL in milliseconds; ARGV[3] "a" or "e".
-- Returns 1 when registered or extended, nil (acquire) or 0 (extend) when
-- refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'e' then
  local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if not s or tonumber(s) <= now then
    return 0
  end
elseif redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  return false
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
-- The set outlives its longest-lived reader, and no longer.
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return 1
