-- Release a read lock on one master (docs/design.md §19): remove the reader.
-- When it was the last live reader and a writer waits (its intent), tell
-- the writers' waiters, on the writer key's channel as a release would
-- (release.lua): a hint that the writer may go, under pcall as there.
-- KEYS[1] the readers; KEYS[2] the writer key; KEYS[3] the intent key.
-- ARGV[1] token. Returns 1 when removed, 0 when it was not there (expired,
-- or never registered).
local r = redis.call('ZREM', KEYS[1], ARGV[1])
if r == 1 and redis.call('EXISTS', KEYS[3]) == 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0 then
    redis.pcall('PUBLISH', KEYS[2], 'readers')
  end
end
return r
