-- One round of a semaphore acquisition (docs/design.md §18): take the first
-- free slot, in the order the caller sent to every master. Each slot is a
-- Redlock key of its own; a caller holds slot j when a majority took j for
-- its token.
-- KEYS[1] the semaphore's permits record (never expires); KEYS[2..k+1] the
-- k slot keys, in the caller's order (the same on every master).
-- ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns the position (1..k) of the slot taken in KEYS[2..], nil when
-- every slot is held, or an error when another caller named a different
-- number of permits for this semaphore.
local k = tostring(#KEYS - 1)
local m = redis.call('GET', KEYS[1])
if m and m ~= k then
  return redis.error_reply('ERR redlock semaphore: permits mismatch: ' .. m .. ' recorded, ' .. k .. ' asked')
end
if not m then
  redis.call('SET', KEYS[1], k)
end
for j = 2, #KEYS do
  if redis.call('SET', KEYS[j], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return j - 1
  end
end
return false
