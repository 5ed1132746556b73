-- One round of a semaphore acquisition (docs/design.md §18): take the first
-- free slot, in the order the caller sent to every master. Each slot is a
-- Redlock key of its own; a caller holds slot j when a majority took j for
-- its token.
-- KEYS[1] the semaphore's permits record; KEYS[2..k+1] the k slot keys, in
-- the caller's order (the same on every master).
-- ARGV[1] token; ARGV[2] TTL in milliseconds.
-- Returns the position (1..k) of the slot taken in KEYS[2..], nil when
-- every slot is held, or an error when the record names a different number
-- of permits for this semaphore.
-- The record lives at least as long as every slot taken here: a slot
-- taken (or extended, sem_extend.lua) pushes its expiry to the slot's, and
-- it expires at most a TTL after the last permit is released. A record
-- with no expiry (written before records expired) gets one.
local k = tostring(#KEYS - 1)
local m = redis.call('GET', KEYS[1])
if m and m ~= k then
  return redis.error_reply('ERR redlock semaphore: permits mismatch: ' .. m .. ' recorded, ' .. k .. ' asked')
end
for j = 2, #KEYS do
  if redis.call('SET', KEYS[j], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
      redis.call('SET', KEYS[1], k, 'PX', ARGV[2])
    end
    return j - 1
  end
end
return false
