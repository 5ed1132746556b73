-- Simulated forward clock jump of ARGV[1] milliseconds on this master:
-- every key with a TTL loses ARGV[1] ms of it; a key whose TTL would reach
-- zero is deleted, as expiry would have done. Keys without a TTL are left
-- alone. Returns how many keys were shortened or deleted.
-- KEYS * (not SCAN) because SCAN may return a key twice, which would shorten
-- it twice; a lab dataset is small and one EVAL is atomic anyway.
local jump = tonumber(ARGV[1])
local n = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  local ttl = redis.call('PTTL', k)
  if ttl > 0 then
    if ttl <= jump then
      redis.call('DEL', k)
    else
      redis.call('PEXPIRE', k, ttl - jump)
    end
    n = n + 1
  end
end
return n
