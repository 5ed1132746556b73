-- A waiter joins the key's queue (ZADD NX: one already there keeps its
-- place) and leaves what a release needs to hand it the key: its token,
-- TTL and the number of this join (docs/design.md §14.3).
-- KEYS[1] the queue; KEYS[2] the grants record; ARGV[1] score; ARGV[2]
-- the waiter's id; ARGV[3] "<join number> <TTL ms> <token>".
redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2])
redis.pcall('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
