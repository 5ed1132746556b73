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
-- With KEYS[3], the queue's grants record (docs/design.md §14.3): a head
-- that left its token and TTL there (join_grant.lua) is handed the key
-- itself: the key is SET to its token, in place of the released one, and
-- the head told so (the SHA-1 of its own token, which only the masters and
-- the waiter know, its id and the number of the join its record came
-- with). A head whose Locker does not listen on this master (PUBSUB
-- NUMSUB: its process is gone) is skipped, and the next tried, up to
-- four; then the key is deleted.
-- PUBLISH, ZPOPMIN and the record's commands run with pcall: a user not
-- allowed them still releases (after the DEL, an error would report a
-- release that happened as refused); its waiters only lose the wake.
-- KEYS[1] lock key; KEYS[2] (optional) its queue; KEYS[3] (optional) the
-- grants record; ARGV[1] token; ARGV[2] (optional) the releasing caller's
-- own id in the queue, taken off the queue and the record first (where it
-- is there), whatever the key holds.
-- Returns 1 when deleted (2 when a waiter was named, 3 when the key was
-- handed to one), 0 when the key is absent, -1 when it holds another
-- owner's token.
local v = redis.call('GET', KEYS[1])
if ARGV[2] and KEYS[2] and redis.pcall('ZSCORE', KEYS[2], ARGV[2]) then
  redis.pcall('ZREM', KEYS[2], ARGV[2])
  if KEYS[3] then
    redis.pcall('HDEL', KEYS[3], ARGV[2])
  end
end
if v == ARGV[1] then
  local msg, ch, r = redis.sha1hex(ARGV[1]), KEYS[1], 1
  if KEYS[2] then
    for _ = 1, 4 do
      local head = redis.pcall('ZPOPMIN', KEYS[2])
      if type(head) ~= 'table' or not head[1] then
        break
      end
      -- A waiter's id is "<Locker id>.<n>": only its Locker hears.
      local lch = KEYS[1] .. ':w:' .. string.match(head[1], '^[^.]*')
      local rec = KEYS[3] and redis.pcall('HGET', KEYS[3], head[1])
      if type(rec) ~= 'string' then
        msg, r, ch = msg .. ' ' .. head[1], 2, lch
        break
      end
      redis.pcall('HDEL', KEYS[3], head[1])
      local seq, ttl, tok = string.match(rec, '^(%d+) (%d+) (.+)$')
      -- Handed only to a Locker that listens here: a grant, once
      -- published, is never taken back (on a Redis Cluster PUBLISH
      -- reaches every node, but counts only this node's listeners).
      local subs = redis.pcall('PUBSUB', 'NUMSUB', lch)
      if type(subs) ~= 'table' or subs.err then
        -- Not allowed to ask: name the head, as without a record.
        msg, r, ch = msg .. ' ' .. head[1], 2, lch
        break
      end
      if tok and subs[2] > 0 then
        -- The SET replaces the released token.
        local set = redis.pcall('SET', KEYS[1], tok, 'PX', ttl)
        if type(set) == 'table' and set.ok then
          redis.pcall('PUBLISH', lch, redis.sha1hex(tok) .. ' ' .. head[1] .. ' ' .. seq)
          return 3
        end
      end
    end
  end
  redis.call('DEL', KEYS[1])
  redis.pcall('PUBLISH', ch, msg)
  return r
end
if v then
  return -1
end
return 0
