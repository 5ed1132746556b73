-- Release a read lock on one master (docs/design.md §19): remove the reader.
-- When it was the last live reader and a writer waits (its intent), tell
-- the writers' waiters, on the writer key's channel as a release would
-- (release.lua): a hint that the writer may go, under pcall as there. The
-- message names the intent (the digest of its token, never the token), so
-- that a Locker counts the masters that announce one drain, not stray
-- announcements of earlier ones.
-- KEYS[1] the readers; KEYS[2] the writer key; KEYS[3] the intent key.
-- ARGV[1] token. Returns 1 when removed, 0 when it was not there (expired,
-- or never registered).
local r = redis.call('ZREM', KEYS[1], ARGV[1])
local intent = r == 1 and redis.call('GET', KEYS[3])
if intent then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0 then
    redis.pcall('PUBLISH', KEYS[2], 'readers:' .. redis.sha1hex(intent))
  end
end
return r
