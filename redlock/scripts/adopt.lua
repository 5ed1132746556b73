-- Adopt (docs/design.md §16): read, without changing anything, whether the
-- lock key holds a token and how long it has left; with fencing, the fence
-- the lock was granted, when this master's counter was written back under
-- that token.
-- KEYS[1] lock key; KEYS[2] (only with fencing) its fence counter.
-- ARGV[1] token.
-- Returns nil when the key does not hold the token; otherwise the key's
-- PTTL in milliseconds as a decimal string, followed by a space and the
-- fence when KEYS[2]'s owner is the token. A PTTL of -1 means the key has
-- no expiry (someone set it by hand): Adopt counts that master as failed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
local pttl = tostring(redis.call('PTTL', KEYS[1]))
if KEYS[2] and redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
  return pttl .. ' ' .. (redis.call('HGET', KEYS[2], 'fence') or '0')
end
return pttl
