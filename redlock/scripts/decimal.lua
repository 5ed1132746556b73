-- Prepended to fenced_write.lua and writeback.lua (scripts.go): Redis
-- scripts cannot share code at run time.
-- Fences are uint64s, passed and stored as decimal strings, and compared
-- as such: tonumber would make them doubles, exact only up to 2^53 (2^53
-- and 2^53+1 are one double, as are all fences near 2^64). dec reads a
-- stored or passed fence (leading zeros dropped, so "" or "0" is zero; nil
-- if it is not a decimal number); cmp orders two such strings exactly: the
-- longer is larger, and equal lengths go digit by digit. Bytes, not '<':
-- Lua 5.1 orders strings with strcoll, that is by the server's locale.
local function dec(s)
  if not string.match(s, '^%d*$') then
    return nil
  end
  s = string.gsub(s, '^0+', '')
  if s == '' then
    return '0'
  end
  return s
end
local function cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end
