-- A waiter leaves the key's queue (docs/design.md §14.1 item 6): its
-- member and its expiry (join.lua).
-- KEYS[1] the queue; KEYS[2] the members' expiries. ARGV[1] the member.
-- Returns 1 when it was in the queue, 0 when not.
local r = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return r
