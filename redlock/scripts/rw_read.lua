-- A read lock on one master (docs/design.md §19). Acquire (ARGV[3] "a"):
-- register the reader where no writer holds the writer key, and no writer
-- waits (its intent key) unless the reader's pass here lets it by: it
-- waited for a write that has since been granted on this master, and goes
-- before the next one. Extend ("e"): move a live reader's expiry. Both
-- expire readers by this master's clock (TIME), as PEXPIRE would.
-- KEYS[1] writer key; KEYS[2] intent key; KEYS[3] the readers (a sorted
-- set: token -> expiry in this master's ms); KEYS[4] the count of write
-- grants here (rw_write.lua).
-- ARGV[1] token; ARGV[2] TTL in milliseconds; ARGV[3] "a" or "e";
-- ARGV[4] (acquire) the reader's pass on this master, 0 for none.
-- Returns 1 when registered or extended, 0 when an extension is refused,
-- and for a refused acquisition -1 - pass: the pass that lets it by the
-- intent once the write it waits for has been granted (the count now
-- while a writer holds the key, one more while one only waits; 0: none).
local ttl = tonumber(ARGV[2])
if ARGV[3] ~= 'e' and redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
  local g = tonumber(redis.call('GET', KEYS[4]) or '0')
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return -1 - g
  end
  local p = tonumber(ARGV[4])
  if p == 0 or g < p then
    return -2 - g
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] == 'e' then
  local s = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if not s or tonumber(s) <= now then
    return 0
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
-- The set outlives its longest-lived reader, and no longer.
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return 1
