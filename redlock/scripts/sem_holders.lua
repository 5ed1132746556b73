-- Which of a semaphore's slots are held on this master (docs/design.md §18).
-- KEYS[1..k] the slot keys. Returns a bit mask: bit j-1 set when slot j
-- exists (k is at most 32, so the mask is exact in a Lua number).
local mask = 0
for j = 1, #KEYS do
  if redis.call('EXISTS', KEYS[j]) == 1 then
    mask = mask + 2 ^ (j - 1)
  end
end
return mask
