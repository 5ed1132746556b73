package redlock

import "strings"

// The commands of the semaphore (semaphore.go), the read-write lock
// (rwmutex.go) and the election's record (election.go), laid out as cmd.go
// lays out the mutex's: c.lua and c.args fall through to primitiveLua and
// primitiveArgs for these kinds.

// mode tells a read or write lock of an RWMutex from a plain lock: what
// its acquisition sends, and for a read lock how it is extended and
// released (the writer's key is an ordinary lock key once held).
type mode uint8

const (
	modeWrite     mode = iota + 1 // TryLock: no intent left behind
	modeWriteWait                 // Lock: record the intent, which stops new readers
	modeRead
)

func (m mode) acquireKind() cmdKind {
	switch m {
	case modeWrite:
		return cmdWrite
	case modeWriteWait:
		return cmdWriteWait
	}
	return cmdRead
}

// primitiveLua is lua for the kinds of this file.
func (c *cmd) primitiveLua() *script {
	switch c.kind {
	case cmdSemAcquire:
		return semAcquireScript
	case cmdSemHolders:
		return semHoldersScript
	case cmdSemExtend:
		return semExtendScript
	case cmdWrite, cmdWriteWait:
		return rwWriteScript
	case cmdRead, cmdReadExtend:
		return rwReadScript
	case cmdUnread:
		return rwUnreadScript
	case cmdLeaderWrite:
		return leaderWriteScript
	case cmdLeaderRead:
		return leaderReadScript
	}
	return nil
}

// primitiveArgs lays out the semaphore's, the read-write lock's and the
// election's commands. An RWMutex's keys share a stem (its lock key) and
// differ in their last letters ("<stem>:w", ":wi", ":wg", ":r"), so each
// is an arg with a suffix, not a string built per master.
func (c *cmd) primitiveArgs(dst []arg) []arg {
	switch c.kind {
	case cmdSemAcquire:
		// KEYS: the permits record, then the slots in the caller's order.
		dst = append(c.evalsha(dst, 1+len(c.x().keys)), suffixed(c.key, metaSuffix))
		for _, k := range c.x().keys {
			dst = append(dst, str(k))
		}
		return append(dst, str(c.token), num(c.n))
	case cmdSemHolders:
		dst = c.evalsha(dst, len(c.x().keys))
		for _, k := range c.x().keys {
			dst = append(dst, str(k))
		}
		return dst
	case cmdSemExtend:
		// key is a slot, "<stem>:s:<j>"; the record is "<stem>:meta".
		stem := c.key[:strings.LastIndex(c.key, slotInfix)]
		return append(c.evalsha(dst, 2), str(c.key), suffixed(stem, metaSuffix), str(c.token), num(c.n), num(c.pass))
	case cmdWrite, cmdWriteWait:
		// key is "<stem>:w".
		stem := c.key[:len(c.key)-1]
		flag := "0"
		if c.kind == cmdWriteWait {
			flag = "1"
		}
		// A writer in the masters' queue passes the queue too, its id
		// there, and whether to ask its place (rw_write.lua).
		queued := c.x().waiter != ""
		nk := 5
		if queued {
			nk = 6
		}
		dst = append(c.evalsha(dst, nk), str(c.key), fence(c.key), suffixed(c.key, "i"), suffixed(stem, "r"),
			suffixed(c.key, "g"))
		if queued {
			dst = append(dst, queue(c.key))
		}
		dst = append(dst, str(c.token), num(c.n), str(flag))
		if !queued {
			return dst
		}
		ask := "0"
		if c.ask {
			ask = "1"
		}
		return append(dst, str(c.x().waiter), str(ask))
	case cmdRead, cmdReadExtend:
		// key is "<stem>:r".
		stem := c.key[:len(c.key)-1]
		if c.kind == cmdReadExtend {
			return append(c.evalsha(dst, 3), suffixed(stem, "w"), suffixed(stem, "wi"), str(c.key),
				str(c.token), num(c.n), str("e"))
		}
		return append(c.evalsha(dst, 4), suffixed(stem, "w"), suffixed(stem, "wi"), str(c.key),
			suffixed(stem, "wg"), str(c.token), num(c.n), str("a"), num(c.pass))
	case cmdUnread:
		stem := c.key[:len(c.key)-1]
		return append(c.evalsha(dst, 3), str(c.key), suffixed(stem, "w"), suffixed(stem, "wi"), str(c.token))
	case cmdLeaderWrite:
		return append(c.evalsha(dst, 2), str(c.key), suffixed(c.key, leaderSuffix), str(c.token), num(c.n), str(c.x().waiter))
	case cmdLeaderRead:
		return append(c.evalsha(dst, 2), str(c.key), suffixed(c.key, leaderSuffix))
	}
	return dst
}
