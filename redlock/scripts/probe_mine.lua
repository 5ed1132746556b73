-- A waiter's poll that also tells whether a release handed it the key
-- (docs/design.md §14.3): -3 when the key holds ARGV[1], the waiter's
-- grant token; otherwise the key's PTTL (-2 absent, -1 no TTL).
-- KEYS[1] lock key; ARGV[1] the waiter's grant token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return -3
end
return redis.call('PTTL', KEYS[1])
