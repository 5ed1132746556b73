-- Compare-and-PEXPIRE: extend the lock only if it still holds our token,
-- and never shorten it: where the key has at least the TTL to live it is
-- left as it is. An extension of our token that lands late (sent on a
-- connection since dropped, or by the process that handed the token over
-- before Adopt) then cannot cut the key under what a later extension
-- counted on (docs/design.md §6).
-- KEYS[1] lock key; ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns 1 when the key holds our token for at least the TTL, 0 when it
-- is gone or someone else's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[2]) then
    return 1
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
