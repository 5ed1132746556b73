-- A waiter joins the key's queue (docs/design.md §14.1): ZADD NX, so a
-- waiter already there keeps its place, then PEXPIRE of the queue to the
-- member's life, renewed by every join. A member whose waiter stopped
-- joining (its Locker closed before its leave reached this master, say)
-- goes with the queue at most its life after the last join, if no
-- release pops it first (§14.1 item 7).
-- The score is when the waiter began waiting, on this master's clock:
-- now (TIME) less the waiter's age, measured by the waiter's own clock,
-- so that waiters of hosts whose clocks disagree queue in the order they
-- began, not by their clocks' offsets.
-- KEYS[1] the queue (member -> the instant its waiter began waiting, in
-- µs of this master's clock). ARGV[1] the waiter's age in µs; ARGV[2]
-- member; ARGV[3] its life in ms.
-- Returns ZADD's reply: 1 when added, 0 when it was there.
local t = redis.call('TIME')
local score = tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(ARGV[1])
local r = redis.call('ZADD', KEYS[1], 'NX', score, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return r
