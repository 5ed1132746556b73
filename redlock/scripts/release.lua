-- Compare-and-DEL: delete the lock only if it still holds our token, so a
-- late release never deletes the next owner's key.
-- KEYS[1] lock key; ARGV[1] token.
-- Returns 1 when deleted, 0 when the key is absent, -1 when it holds
-- another owner's token.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
if v then
  return -1
end
return 0
