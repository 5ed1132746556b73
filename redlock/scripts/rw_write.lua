-- One round of a write-lock acquisition (docs/design.md §19): take the
-- writer key only where no other writer holds it and no reader is live, and
-- read its fence counter (as acquire_fenced.lua). A waiting writer (ARGV[3]
-- "1") first records its intent, which stops new readers for a TTL: writers
-- are preferred.
-- KEYS[1] writer key; KEYS[2] its fence counter; KEYS[3] the intent key;
-- KEYS[4] the readers (a sorted set: token -> expiry in this master's ms);
-- KEYS[5] the count of write grants here, which readers' passes name
-- (rw_read.lua); for a writer in the masters' queue of waiters (§14.1),
-- KEYS[6] that queue.
-- ARGV[1] token; ARGV[2] TTL in milliseconds; ARGV[3] "1" to record intent;
-- with KEYS[6], ARGV[4] the writer's id in the queue and ARGV[5] "1" to
-- refuse it first, while other waiters are ahead of it there (the place a
-- woken waiter asks, §14.1 item 3). Only who waits depends on the queue:
-- the grant is decided by the writer key and the live readers alone, and
-- takes the writer off the queue in the same script.
-- Returns the fence counter as a decimal string ("0" if none), or when
-- refused -1 (another writer holds the key), -2 (a reader is live) or
-- -2 - rank (rank >= 1 waiters ahead of it in the queue).
-- Behind others, it writes nothing, as the ZRANK this replaces did not.
-- Under pcall, as release.lua's ZPOPMIN: an ACL without ZRANK or ZREM
-- leaves the queue out (the writer counts as its head), not the lock.
if ARGV[5] == '1' then
  local r = redis.pcall('ZRANK', KEYS[6], ARGV[4])
  if type(r) == 'number' and r > 0 then
    return -2 - r
  end
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if redis.call('ZCARD', KEYS[4]) > 0 then
  return -2
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if KEYS[6] then
  redis.pcall('ZREM', KEYS[6], ARGV[4])
end
-- Every intent goes: the writer key now keeps readers out, and writers
-- still waiting record theirs again on their next round. The readers that
-- were refused before this grant hold a pass that lets them by those
-- intents once this writer has gone (no phase of writers starves them).
redis.call('DEL', KEYS[3])
redis.call('SET', KEYS[5], tonumber(redis.call('GET', KEYS[5]) or '0') + 1, 'PX', ARGV[2])
return redis.call('HGET', KEYS[2], 'fence') or '0'
