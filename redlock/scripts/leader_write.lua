-- An election's leader publishes its value (docs/design.md §21): written
-- only while this master's lock key holds the leader's token, and never
-- over a record of a later term.
-- KEYS[1] the election's lock key; KEYS[2] its record (a hash: term,
-- token, value), which is also the channel observers listen on.
-- ARGV[1] the leader's token; ARGV[2] its term (the lock's fence, decimal);
-- ARGV[3] the value.
-- Returns 1 when written (and published), 0 when the key does not hold the
-- token here, −1 when a later term is recorded. dec and cmp come from
-- decimal.lua, prepended.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local last = dec(redis.call('HGET', KEYS[2], 'term') or '0')
local term = dec(ARGV[2])
if not last or not term then
  return redis.error_reply('ERR redlock leader: a term is not a decimal number')
end
if cmp(term, last) < 0 then
  return -1
end
redis.call('HSET', KEYS[2], 'term', ARGV[2], 'token', ARGV[1], 'value', ARGV[3])
redis.call('PUBLISH', KEYS[2], ARGV[2])
return 1
