-- Compare-and-DEL: delete the lock only if it still holds our token, so a
-- late release never deletes the next owner's key; then tell the waiters
-- subscribed to the key's channel (named like the key) that it is free.
-- The message is the SHA-1 of the token, never the token: it tells one
-- holder's release (published by every master that held it) from another's.
-- Waiters that miss the message retry on their backoff. PUBLISH runs
-- with pcall: a user not allowed to publish still releases (after the DEL,
-- an error would report a release that happened as refused); its waiters
-- only lose the wake.
-- KEYS[1] lock key; ARGV[1] token.
-- Returns 1 when deleted, 0 when the key is absent, -1 when it holds
-- another owner's token.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.pcall('PUBLISH', KEYS[1], redis.sha1hex(ARGV[1]))
  return 1
end
if v then
  return -1
end
return 0
