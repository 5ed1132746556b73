-- Compare-and-PEXPIRE of a semaphore's permit (docs/design.md §18): extend
-- the slot only while it holds our token, never shortening it, as
-- extend.lua does, and keep the semaphore's permits record alive at least
-- as long (written again if it is gone, e.g. deleted by an operator's
-- reset while the permit was held).
-- KEYS[1] the slot key; KEYS[2] the permits record.
-- ARGV[1] token; ARGV[2] TTL in milliseconds; ARGV[3] the permits.
-- Returns 1 when extended, 0 when the slot is gone or someone else's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], redis.call('GET', KEYS[2]) or ARGV[3], 'PX', ARGV[2])
end
return 1
