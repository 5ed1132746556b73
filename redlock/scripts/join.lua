-- A waiter joins the key's queue (docs/design.md §14.1): ZADD NX, so a
-- waiter already there keeps its place, and its expiry on this master's
-- clock (TIME) recorded beside it, renewed by every join. Both keys live
-- at least the member's life past this join: a member whose Locker is
-- gone, and never sends the leave, is dropped by the release that pops it
-- (release.lua) once it is older than its life, and the queue goes with
-- its last join (§14.1 item 7).
-- KEYS[1] the queue (member -> the instant its waiter began waiting, in
-- µs of the waiter's clock); KEYS[2] the members' expiries (member ->
-- this master's ms).
-- ARGV[1] score; ARGV[2] member; ARGV[3] its life in ms.
-- Returns ZADD's reply: 1 when added, 0 when it was there.
local life = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + life, ARGV[2])
redis.call('PEXPIRE', KEYS[1], life)
redis.call('PEXPIRE', KEYS[2], life)
return r
