-- Who leads an election on this master (docs/design.md §21): one reading
-- of its lock key and its record, at one instant.
-- KEYS[1] the election's lock key; KEYS[2] its record (term, token, value).
-- Returns "0" when the key is absent; "1 <pttl>" when it is held by a
-- token the record does not name (a leader that has not published yet);
-- "2 <pttl> <term> <sha1 of the token> <value>" when the record is the
-- holder's.
local token = redis.call('GET', KEYS[1])
if not token then
  return '0'
end
local pttl = redis.call('PTTL', KEYS[1])
local rec = redis.call('HMGET', KEYS[2], 'term', 'token', 'value')
if rec[2] ~= token then
  return '1 ' .. pttl
end
return '2 ' .. pttl .. ' ' .. (rec[1] or '') .. ' ' .. redis.sha1hex(token) .. ' ' .. (rec[3] or '')
