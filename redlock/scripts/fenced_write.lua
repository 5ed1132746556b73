-- A fenced write to a resource kept in Redis: accept the value only if its
-- fence is not lower than the highest fence accepted so far (an equal fence
-- is the same holder writing again). A stale holder, one whose lock was
-- lost and taken over by a holder with a larger fence, is rejected.
-- KEYS[1] the resource (a hash: value, fence). ARGV[1] fence; ARGV[2] value.
-- Returns 1 when accepted, 0 when rejected as stale.
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < last then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1
