-- Compare-and-PEXPIRE for many locks at once, each decided on its own: the
-- keeper's batched extension (docs/design.md §8). Per key it does exactly
-- what extend.lua does for one (never shortening a key), so a key that is
-- gone or someone else's here fails only its own lock.
-- KEYS[i] a lock key; ARGV[2i-1] its token; ARGV[2i] its TTL in
-- milliseconds. Returns a string of one character per key, in order: '1'
-- extended, '0' gone or someone else's.
local r = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] and
    (redis.call('PTTL', KEYS[i]) >= tonumber(ARGV[2 * i]) or redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) == 1) then
    r[i] = '1'
  else
    r[i] = '0'
  end
end
return table.concat(r)
