-- Round 1 of a fenced acquisition (docs/design.md §5): SET NX PX and, only if it
-- succeeded, read this master's fence counter, atomically.
-- KEYS[1] lock key; KEYS[2] fence key (same hash slot; never expires).
-- ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns the counter as a decimal string ("0" if none), or nil when the
-- lock is held by someone else.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('HGET', KEYS[2], 'fence') or '0'
end
return false
