-- Which of a semaphore's slots are held on this master (docs/design.md §18).
-- KEYS[1..k] the slot keys. Returns a string of k characters: the j-th is
-- '1' when slot j exists, else '0'.
local r = {}
for j = 1, #KEYS do
  r[j] = tostring(redis.call('EXISTS', KEYS[j]))
end
return table.concat(r)
