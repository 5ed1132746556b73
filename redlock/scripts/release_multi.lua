-- Compare-and-DEL for a lock on several resources: delete each lock key
-- that holds our token and tell its waiters (release.lua, PUBLISH under
-- pcall as there); never touch a
-- key that holds another owner's token.
-- KEYS[1..n] the lock keys; ARGV[1] token.
-- Returns -1 when any key holds another owner's token, else how many keys
-- were deleted (0: all already gone).
local other, deleted = false, 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == ARGV[1] then
    redis.call('DEL', KEYS[i])
    redis.pcall('PUBLISH', KEYS[i], redis.sha1hex(ARGV[1]))
    deleted = deleted + 1
  elseif v then
    other = true
  end
end
if other then
  return -1
end
return deleted
