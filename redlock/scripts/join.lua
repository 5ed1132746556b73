-- A waiter joins the key's queue (docs/design.md §14.1): ZADD NX, so a
-- waiter already there keeps its place, then PEXPIRE of the queue to the
-- member's life, renewed by every join. A member whose waiter stopped
-- joining (its Locker closed before its leave reached this master, say)
-- goes with the queue at most its life after the last join, if no
-- release pops it first (§14.1 item 7).
-- The score is when the waiter began waiting, in µs. This master reckons
-- it on its own clock: now (TIME) less the waiter's age, measured on the
-- waiter's monotonic clock. The waiter also sends the instant it began on
-- its own wall clock, the same to every master; the score is that
-- instant where it lies within the slack of this master's reckoning, and
-- the reckoning where it does not. So where the hosts' clocks agree
-- within the slack, every master scores a waiter alike and the masters
-- order their queues alike; a host whose clock disagrees gains or loses
-- at most the slack in line, and where it disagrees by more, each master
-- scores its waiters by its own reckoning, which differs between masters
-- only by the joins' one-way delays (not by the slack, up or down as
-- each master's clock reads ahead of the host's or behind it).
-- KEYS[1] the queue. ARGV[1] the waiter's age in µs; ARGV[2] member;
-- ARGV[3] its life in ms; ARGV[4] the instant the waiter began, in µs of
-- its wall clock; ARGV[5] the slack in µs.
-- Returns ZADD's reply: 1 when added, 0 when it was there.
local t = redis.call('TIME')
local m = tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(ARGV[1])
local e = tonumber(ARGV[5])
local w = tonumber(ARGV[4])
local score = m
if math.abs(w - m) <= e then
  score = w
end
local r = redis.call('ZADD', KEYS[1], 'NX', score, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return r
