-- Compare-and-PEXPIRE for a lock on several resources: extend only if every
-- lock key still holds our token (then all of them), so a master counts
-- toward the quorum only while it holds the whole set. As extend.lua, it
-- never shortens a key.
-- KEYS[1..n] the lock keys; ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns 1 when extended, 0 otherwise.
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 1
