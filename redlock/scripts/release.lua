-- Compare-and-DEL: delete the lock only if it still holds our token, so a
-- late release never deletes the next owner's key; then tell the waiters
-- subscribed to the key's channel (named like the key) that it is free.
-- The message is the SHA-1 of the token, never the token: it tells one
-- holder's release (published by every master that held it) from another's.
-- With KEYS[2], the key's queue of waiting callers (a sorted set by the
-- time each started waiting, docs/design.md §14), the longest waiting is
-- taken off the queue and named after a space, on a channel only that
-- caller's Locker listens to (the key's name, ':w:' and the Locker's id).
-- Waiters that miss the message retry on their backoff.
-- With ARGV[3] = 'h' (docs/design.md §14.3), a head whose queue member
-- is "<id> <TTL ms> <token>" (a waiter that asked to be handed the key)
-- is handed the key itself: the key is SET to its token, in place of the
-- released one, and the head told so: "<SHA-1 of its token> <id> +" (the
-- digest of a token only the masters and the waiter know). The same is
-- done when the key is absent here (expired, or never set on this master):
-- it is free, and the head is handed it as a round of its own would take
-- it. A head whose Locker does not listen on this master (PUBSUB NUMSUB:
-- its process is gone) is skipped, and the next tried, up to four; then
-- the key is deleted. Where the key is absent, a head that did not ask is
-- put back, and nothing else is done.
-- PUBLISH, ZPOPMIN and the queue's commands run with pcall: a user not
-- allowed them still releases (after the DEL, an error would report a
-- release that happened as refused); its waiters only lose the wake.
-- A head put back goes back into a queue that its pop may have emptied
-- and so deleted, with its expiry: with ARGV[4], the queue is given that
-- life again (join.lua; docs/design.md §14.1 item 7).
-- KEYS[1] lock key; KEYS[2] (optional) its queue; ARGV[1] token; ARGV[2]
-- (optional, "" for none) the releasing caller's own queue member, taken
-- off the queue first, whatever the key holds; ARGV[3] (optional) 'h';
-- ARGV[4] (optional) the queue's life in ms.
-- Returns 1 when deleted (2 when a waiter was named, 3 when the key was
-- handed to one), 0 when the key is absent (handed on or not), -1 when it
-- holds another owner's token.
local v = redis.call('GET', KEYS[1])
if KEYS[2] and ARGV[2] and ARGV[2] ~= '' then
  redis.pcall('ZREM', KEYS[2], ARGV[2])
end
local hand = ARGV[3] == 'h'
if v ~= ARGV[1] and (v or not hand or not KEYS[2]) then
  if v then
    return -1
  end
  return 0
end
local msg, ch, r = redis.sha1hex(ARGV[1]), KEYS[1], 1
if KEYS[2] then
  for _ = 1, 4 do
    local head = redis.pcall('ZPOPMIN', KEYS[2])
    if type(head) ~= 'table' or not head[1] then
      break
    end
    local id, ttl, tok = string.match(head[1], '^(%S+) (%d+) (.+)$')
    -- A waiter's id is "<Locker id>.<n>": only its Locker hears.
    local lch = KEYS[1] .. ':w:' .. string.match(id or head[1], '^[^.]*')
    local subs = hand and id and redis.pcall('PUBSUB', 'NUMSUB', lch)
    if type(subs) ~= 'table' or subs.err then
      -- Did not ask, or not allowed to ask whether its Locker listens:
      -- name it (never its token), or where the key is absent, put it
      -- back.
      if not v then
        redis.pcall('ZADD', KEYS[2], head[2], head[1])
        if ARGV[4] then
          redis.pcall('PEXPIRE', KEYS[2], ARGV[4])
        end
        return 0
      end
      msg, r, ch = msg .. ' ' .. (id or head[1]), 2, lch
      break
    end
    -- Handed only to a Locker that listens here: a grant, once
    -- published, is never taken back (on a Redis Cluster PUBLISH reaches
    -- every node, but counts only this node's listeners).
    if subs[2] > 0 then
      -- The SET replaces the released token.
      local set = redis.pcall('SET', KEYS[1], tok, 'PX', ttl)
      if type(set) == 'table' and set.ok then
        redis.pcall('PUBLISH', lch, redis.sha1hex(tok) .. ' ' .. id .. ' +')
        if v then
          return 3
        end
        return 0
      end
    end
  end
end
if not v then
  return 0
end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ch, msg)
return r
