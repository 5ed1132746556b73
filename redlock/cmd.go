package redlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlab/redlock/internal/transport"
	"github.com/quorumlab/redlock/quorum"
)

// cmdKind is one of the few commands the Locker sends.
type cmdKind uint8

const (
	cmdSetNX         cmdKind = iota // SET key token NX PX ttl
	cmdAcquireFenced                // acquire_fenced.lua: SET NX PX, then read the fence counter
	cmdWriteback                    // writeback.lua: raise the counter to the fence under our token
	cmdExtend                       // extend.lua: compare-and-PEXPIRE
	cmdRelease                      // release.lua: compare-and-DEL
	cmdLoad                         // SCRIPT LOAD, after a NOSCRIPT
	// The same for a lock on several resources (keys): all of them or
	// none on each master.
	cmdAcquireMulti   // acquire_multi.lua: SET NX PX every key, and read their fence counters if fenced
	cmdWritebackMulti // writeback_multi.lua
	cmdExtendMulti    // extend_multi.lua
	cmdReleaseMulti   // release_multi.lua
	// The key's queue of waiting callers (docs/design.md §14); token is
	// the waiter's queue member (its id, or for a waiter a release may
	// hand the key to, "<id> <TTL ms> <grant token>", §14.3), n its
	// waiter's age in µs, wall the instant it began and slack how far a
	// master moves that instant towards its own reckoning, TIME − age
	// (§14.1 item 1), pass its life in ms (§14.1 item 7).
	cmdJoin  // join.lua: ZADD queue NX (the waiter's instant, within the slack of TIME − age) member, then PEXPIRE queue life
	cmdLeave // ZREM queue member
	cmdProbe // PTTL key: a waiter's poll, which takes nothing, and when the holder's key expires
	cmdRank  // ZRANK queue member: the waiter's place, when its poll found the key free
	cmdAdopt // adopt.lua: does the key hold token, its PTTL, and the fence if fenced (adopt.go)
	// The semaphore and the read-write lock (semaphore.go, rwmutex.go).
	cmdSemAcquire // sem_acquire.lua: the first free slot of keys; key is the permits record
	cmdSemHolders // sem_holders.lua: which slots of keys are held
	cmdWrite      // rw_write.lua: the writer key where no reader is live
	cmdWriteWait  // rw_write.lua, recording the writer's intent first
	cmdRead       // rw_read.lua: register a reader (key: the readers' set)
	cmdReadExtend // rw_read.lua: move a live reader's expiry
	cmdUnread     // rw_unread.lua: remove a reader
	// The keeper's batched extension (keepbatch.go): compare-and-PEXPIRE
	// of many single-key locks, each decided on its own; the keys,
	// tokens and TTLs are ext's.
	cmdExtendBatch // extend_batch.lua
	// A waiter that a release may hand the key to (docs/design.md §14.3).
	cmdProbeMine // probe_mine.lua: cmdProbe that also says whether the key holds token (the waiter's grant token)
	// A semaphore's permit (semaphore.go): extended with its record.
	cmdSemExtend // sem_extend.lua: compare-and-PEXPIRE of key, a slot, and the semaphore's record kept as long
	// An election (election.go); key is its lock key, the record is
	// key + ":leader".
	cmdLeaderWrite // leader_write.lua: the leader's term (n) and value (waiter), under its token
	cmdLeaderRead  // leader_read.lua: the holder here and the record, one string per master (bits)
)

// lua is the Lua script c runs with EVALSHA (nil for SET and SCRIPT
// LOAD): the one place that maps a kind to its script, for its arguments,
// a NOSCRIPT reply (Resend) and errors (acl.go).
func (c *cmd) lua() *script {
	switch c.kind {
	case cmdAcquireFenced:
		return acquireFencedScript
	case cmdWriteback:
		return writebackScript
	case cmdExtend:
		return extendScript
	case cmdRelease:
		return releaseScript
	case cmdAcquireMulti:
		return acquireMultiScript
	case cmdWritebackMulti:
		return writebackMultiScript
	case cmdExtendMulti:
		return extendMultiScript
	case cmdReleaseMulti:
		return releaseMultiScript
	case cmdAdopt:
		return adoptScript
	case cmdExtendBatch:
		return extendBatchScript
	case cmdProbeMine:
		return probeMineScript
	case cmdJoin:
		return joinScript
	}
	return c.primitiveLua()
}

// arg is one argument of a command, laid out without allocating
// (transport.Arg: a string, a key with a suffix, or a number).
type arg = transport.Arg

func str(s string) arg     { return transport.Str(s) }
func num(n uint64) arg     { return transport.Num(n) }
func fence(key string) arg { return transport.Suffixed(key, fenceSuffix) }
func queue(key string) arg { return transport.Suffixed(key, queueSuffix) }

// suffixed is the argument s + suffix (a key of the lock's hash tag).
func suffixed(s, suffix string) arg { return transport.Suffixed(s, suffix) }

// args appends c's command, its name first, to dst: the one place where
// each kind's keys and arguments are laid out. The transport's links
// only serialize the list.
func (c *cmd) args(dst []arg) []arg {
	switch c.kind {
	case cmdSetNX:
		return append(dst, str("SET"), str(c.key), str(c.token), str("NX"), str("PX"), num(c.n))
	case cmdAcquireFenced, cmdWriteback:
		return append(c.evalsha(dst, 2), str(c.key), fence(c.key), str(c.token), num(c.n))
	case cmdExtend:
		return append(c.evalsha(dst, 1), str(c.key), str(c.token), num(c.n))
	case cmdRelease:
		nk := c.releaseKeys()
		dst = append(c.evalsha(dst, nk), str(c.key))
		if nk >= 2 {
			dst = append(dst, queue(c.key))
		}
		dst = append(dst, str(c.token))
		switch {
		case c.pop == releaseHand:
			// The releasing waiter's own queue member ("" for none)
			// goes first; then the key may be handed itself (§14.3),
			// and a head put back keeps the queue's life (pass).
			dst = append(dst, str(c.x().waiter), str("h"), num(c.pass))
		case c.x().waiter != "" && nk >= 2:
			dst = append(dst, str(c.x().waiter))
		}
		return dst
	case cmdProbeMine:
		return append(c.evalsha(dst, 1), str(c.key), str(c.token))
	case cmdJoin:
		return append(c.evalsha(dst, 1), queue(c.key), num(c.n), str(c.token), num(c.pass), num(c.x().wall), num(c.x().slack))
	case cmdLeave:
		return append(dst, str("ZREM"), queue(c.key), str(c.token))
	case cmdProbe:
		return append(dst, str("PTTL"), str(c.key))
	case cmdRank:
		return append(dst, str("ZRANK"), queue(c.key), str(c.token))
	case cmdAdopt:
		if c.fenced {
			return append(c.evalsha(dst, 2), str(c.key), fence(c.key), str(c.token))
		}
		return append(c.evalsha(dst, 1), str(c.key), str(c.token))
	case cmdAcquireMulti, cmdWritebackMulti:
		// KEYS: the lock keys, then their fence counters when fenced;
		// ARGV: token, TTL or fence, the key count, and for an acquire
		// whether to read the fences ("0"/"1").
		fences := c.kind == cmdWritebackMulti || c.fenced
		nk := len(c.x().keys)
		if fences {
			nk *= 2
		}
		dst = c.evalsha(dst, nk)
		for _, key := range c.x().keys {
			dst = append(dst, str(key))
		}
		if fences {
			for _, key := range c.x().keys {
				dst = append(dst, fence(key))
			}
		}
		dst = append(dst, str(c.token), num(c.n), num(uint64(len(c.x().keys))))
		if c.kind == cmdAcquireMulti {
			flag := "0"
			if c.fenced {
				flag = "1"
			}
			dst = append(dst, str(flag))
		}
		return dst
	case cmdExtendMulti, cmdReleaseMulti:
		dst = c.evalsha(dst, len(c.x().keys))
		for _, key := range c.x().keys {
			dst = append(dst, str(key))
		}
		dst = append(dst, str(c.token))
		if c.kind == cmdExtendMulti {
			dst = append(dst, num(c.n))
		}
		return dst
	case cmdExtendBatch:
		b := c.x().ext
		dst = c.evalsha(dst, len(b.keys))
		for _, key := range b.keys {
			dst = append(dst, str(key))
		}
		for i, tok := range b.tokens {
			dst = append(dst, str(tok), num(b.ttls[i]))
		}
		return dst
	case cmdLoad:
		return append(dst, str("SCRIPT"), str("LOAD"), str(c.x().script.src))
	}
	return c.primitiveArgs(dst)
}

// evalsha appends the head of an EVALSHA of c's script with nkeys keys.
func (c *cmd) evalsha(dst []arg, nkeys int) []arg {
	return append(dst, str("EVALSHA"), str(c.lua().sha), num(uint64(nkeys)))
}

// queueKey is the lock key's queue of waiting callers, in its hash slot.
func queueKey(lock string) string { return lock + queueSuffix }

const queueSuffix = ":waiters"

// probeMine is a cmdProbeMine reply's Value where the key holds the
// waiter's own grant token.
const probeMine = 1

// releaseKeys is how many keys a cmdRelease passes: the lock key, and its
// queue when the release hands the key on (releasePop or releaseHand).
func (c *cmd) releaseKeys() int { return 1 + int(min(c.pop, releasePop)) }

// releaseQueue is what a cmdRelease does with the key's queue
// (release.lua).
type releaseQueue uint8

const (
	releaseKeyOnly releaseQueue = iota // the key only: the queue is left as it is
	releasePop                         // and pop the queue's head, naming it in the announcement (§14.1)
	releaseHand                        // and also hand the key itself to a head that asked (§14.3)
)

// isRelease reports whether c is a release (of a lock, a permit or a read
// lock).
func (c *cmd) isRelease() bool {
	return c.kind == cmdRelease || c.kind == cmdReleaseMulti || c.kind == cmdUnread
}

// Parks reports whether c is parked for a master that is not answering,
// and sent when it answers: a release, and a waiter's leave of the queue.
// Both take back what the caller put on the master, whose outcome no
// longer matters to the caller but must reach the master whenever it
// answers again: a key left behind blocks others for its TTL, a queue
// member left behind is named by the next release in place of a live
// waiter, until the queue expires (docs/design.md §14.1).
func (c *cmd) Parks() bool { return c.isRelease() || c.kind == cmdLeave }

// cmd is one command to one master, and where its reply goes.
type cmd struct {
	// A round allocates one cmd per master in one slice, so its size is
	// what an acquisition allocates most of: 80 bytes (5 × 80 in a
	// 416-byte size class), the one-byte fields first, together, and the
	// fields only some kinds use behind more.
	kind   cmdKind
	fenced bool         // cmdAcquireMulti: read the fence counters too; cmdAdopt: read the fence
	resent bool         // sent again after a NOSCRIPT reply
	ask    bool         // cmdWriteWait: a master refuses it while others are ahead of it in the queue (rw_write.lua)
	pop    releaseQueue // cmdRelease: what it does with the key's queue
	key    string       // the lock key (the first of keys); the fence key is key + ":fence"
	token  string
	// n is one number whose meaning is the kind's (a field per meaning
	// would take the cmd to a larger size class): the TTL in ms for the
	// acquisitions and extensions (cmdSetNX, cmdAcquireFenced,
	// cmdAcquireMulti, cmdExtend, cmdExtendMulti, cmdSemAcquire,
	// cmdSemExtend, cmdWrite, cmdWriteWait, cmdRead, cmdReadExtend); the
	// fence for cmdWriteback, cmdWritebackMulti, and cmdLeaderWrite (the
	// term); the waiter's age in µs for cmdJoin. Unused by the others.
	n     uint64
	pass  uint64 // cmdRead: the reader's pass on this master (rw_read.lua), 0 for none; cmdSemExtend: the permits; cmdJoin, and cmdRelease with releaseHand: the queue's life in ms
	round *quorum.Round
	node  int
	more  *cmdMore // nil unless a field of it is set (setMore)
}

// cmdMore holds the fields of a cmd that only some kinds use, so that the
// others (an uncontended acquisition's SET and its release) do not carry
// them.
type cmdMore struct {
	keys   []string  // every lock key, for the Multi kinds
	script *script   // for cmdLoad
	ext    *extBatch // cmdExtendBatch: its keys, and where each key's answer goes
	bits   *semBits  // cmdSemHolders, cmdLeaderRead: where each master's answer goes
	// cmdWriteWait: the writer's id in the masters' queue ("" when it is
	// not in it). cmdRelease: the releasing waiter's own member in the
	// queue, to take off. cmdLeaderWrite: the value.
	waiter string
	// cmdJoin: the instant its waiter began, in µs of the waiter's wall
	// clock, and how far a master may move it towards its own reckoning,
	// in µs (join.lua).
	wall, slack uint64
}

// noMore is the cmdMore of a cmd that has none: every field zero.
var noMore cmdMore

// x returns c's cmdMore for reading: the zero one when it has none.
func (c *cmd) x() *cmdMore {
	if c.more == nil {
		return &noMore
	}
	return c.more
}

// setMore returns c's cmdMore for writing, made on first use.
func (c *cmd) setMore() *cmdMore {
	if c.more == nil {
		c.more = new(cmdMore)
	}
	return c.more
}

// setWaiter sets c's waiter, without making a cmdMore for none (a round's
// cmds start zero, so an empty waiter is already there).
func (c *cmd) setWaiter(w string) {
	if w != "" {
		c.setMore().waiter = w
	}
}

// Done hands the command's outcome, which came at now, to its round, if
// the round still waits. A reply that comes after its round stopped
// waiting needs nothing more: whatever it did on the master is cleaned up
// by the release that follows it on the same stream.
func (c *cmd) Done(rep quorum.Reply, now time.Time) {
	if c.x().ext != nil {
		// Before the round: the batch may decide, and the round's
		// waiter stop, on this reply.
		c.x().ext.answered(c.node, rep.Outcome == quorum.OK)
	}
	if c.round != nil {
		rep.Latency = max(now.Sub(c.round.Start()), 1)
		c.round.Deliver(c.node, rep)
	}
}

// The rest of what a stream asks of a command (transport.Command).

// Args is args, for the links.
func (c *cmd) Args(dst []arg) []arg { return c.args(dst) }

// Key is the lock key, by whose slot a Redis Cluster master sends c to a
// shard: every key c names shares its hash tag.
func (c *cmd) Key() string { return c.key }

// Park detaches c, parked, from its round, which no longer waits for it.
func (c *cmd) Park() { c.round = nil }

// Answer hands the reply r, which came at now, to c's round, as what it
// means for c (interpret).
func (c *cmd) Answer(r respReply, now time.Time) { c.Done(c.interpret(r), now) }

// Resend reports whether c, answered NOSCRIPT (it did not run), is sent
// again once the scripts are loaded, and marks it so; ahead reports
// whether a command matching is queued, in flight or parked on c's
// stream. Releases and extensions may run late at any time
// (compare-and-delete, compare-and-expire on a token no one else has). An
// acquisition may not run after a release of its own token, so it is sent
// again only if no such release is ahead of it; nor may a waiter's join
// run after its leave, or after the release that removes its member (its
// member would stay in the queue, named or handed the key by the next
// releases, until the queue expires). Each command is sent again once: a
// master that keeps answering NOSCRIPT fails it.
func (c *cmd) Resend(ahead func(matching func(transport.Command) bool) bool) bool {
	if c.resent || c.lua() == nil {
		return false
	}
	if c.kind == cmdJoin && leaveAhead(ahead, c.key, c.token) {
		return false
	}
	if !c.isRelease() && c.kind != cmdExtend && c.kind != cmdExtendMulti && c.kind != cmdExtendBatch && releaseAhead(ahead, c.token) {
		return false
	}
	c.resent = true
	return true
}

// leaveAhead reports whether a command that takes member off key's queue
// is ahead: a leave of its waiter's id (the member's first field), or a
// release that removes this very member first (Unlock of a handed lock,
// §14.3 item 6; a give-back's release removes a member that its waiter's
// later join, with its bare id, does not bring back).
func leaveAhead(ahead func(func(transport.Command) bool) bool, key, member string) bool {
	id, _, _ := strings.Cut(member, " ")
	return ahead(func(x transport.Command) bool {
		c, ok := x.(*cmd)
		if !ok || c.key != key {
			return false
		}
		if c.isRelease() {
			return c.x().waiter != "" && c.x().waiter == member
		}
		other, _, _ := strings.Cut(c.token, " ")
		return c.kind == cmdLeave && other == id
	})
}

// releaseAhead reports whether a release of token is ahead.
func releaseAhead(ahead func(func(transport.Command) bool) bool, token string) bool {
	return ahead(func(x transport.Command) bool {
		c, ok := x.(*cmd)
		return ok && c.isRelease() && c.token == token
	})
}

// respReply is one RESP reply, as every link reads it: interpret makes
// it the command's quorum.Reply.
type respReply = transport.Raw

// serverError is an error reply from a master, e.g. NOSCRIPT or NOPERM.
type serverError = transport.ServerError

var errUnexpected = transport.ErrUnexpected

// interpret turns a reply into the command's outcome.
func (c *cmd) interpret(r respReply) quorum.Reply {
	if r.Type == '-' {
		return quorum.Reply{Outcome: quorum.Failed, Err: c.replyError(r.Text)}
	}
	if rep, ok := c.interpretLock(r); ok {
		return rep
	}
	if rep, ok := c.interpretOther(r); ok {
		return rep
	}
	return quorum.Reply{Outcome: quorum.Failed, Err: fmt.Errorf("%w: type %q to command %d", errUnexpected, r.Type, c.kind)}
}

// interpretLock reads the reply to a lock's acquisition, fence
// write-back, extension or release; false when c is not one, or r is not
// a reply it can have.
func (c *cmd) interpretLock(r respReply) (quorum.Reply, bool) {
	ok := quorum.Reply{Outcome: quorum.OK}
	no := quorum.Reply{Outcome: quorum.Refused}
	switch c.kind {
	case cmdSetNX:
		switch r.Type {
		case '+':
			return ok, true
		case '_':
			return no, true
		}
	case cmdAcquireFenced, cmdAcquireMulti, cmdWrite, cmdWriteWait:
		switch r.Type {
		case ':':
			// rw_write.lua's refusal: Value 1, another writer holds the
			// key; 2, a reader is live; 2 + rank, rank ≥ 1 waiters are
			// ahead of the writer in the queue (asked with c.ask).
			if r.N == -1 || r.N == -2 || r.N < -2 && c.ask {
				no.Value = uint64(-r.N)
				return no, true
			}
		case '$':
			v, err := strconv.ParseUint(r.Text, 10, 64)
			if err != nil {
				return quorum.Reply{Outcome: quorum.Failed, Err: fmt.Errorf("redlock: corrupt fence counter %q: %w", r.Text, err)}, true
			}
			ok.Value = v
			return ok, true
		case '_':
			return no, true
		}
	case cmdWriteback, cmdExtend, cmdWritebackMulti, cmdExtendMulti, cmdReadExtend, cmdSemExtend:
		if r.Type == ':' {
			if r.N == 1 {
				return ok, true
			}
			return no, true
		}
	case cmdRelease, cmdReleaseMulti, cmdUnread:
		// 1 deleted, 0 already gone (both: the key is not ours any more),
		// −1 another owner's token is there.
		if r.Type == ':' {
			if r.N >= 0 {
				ok.Value = uint64(r.N) // release.lua: 2 when it woke a queued caller
				return ok, true
			}
			return no, true
		}
	}
	return quorum.Reply{}, false
}

// interpretOther reads the reply to a queue command, a permit's or read
// lock's acquisition, a count of a semaphore's holders, a poll, a rank,
// an adoption, a batched extension or a script load; false as for
// interpretLock.
func (c *cmd) interpretOther(r respReply) (quorum.Reply, bool) {
	ok := quorum.Reply{Outcome: quorum.OK}
	no := quorum.Reply{Outcome: quorum.Refused}
	switch c.kind {
	case cmdJoin, cmdLeave:
		if r.Type == ':' {
			return ok, true
		}
	case cmdSemAcquire, cmdRead:
		// Value: the position of the slot taken (cmdRead: 1). A refused
		// read (−1 − pass) carries the reader's pass on this master.
		switch r.Type {
		case ':':
			if r.N < 0 && c.kind == cmdRead {
				no.Value = uint64(-(r.N + 1))
				return no, true
			}
			ok.Value = uint64(r.N)
			return ok, true
		case '_':
			return no, true
		}
	case cmdLeaderWrite:
		// 1 written; 0 the key does not hold the token here; −1 a later
		// term is recorded (Value 1).
		if r.Type == ':' {
			switch r.N {
			case 1:
				return ok, true
			case -1:
				no.Value = 1
			}
			return no, true
		}
	case cmdLeaderRead:
		if r.Type == '$' && c.x().bits != nil {
			c.x().bits.record(c.node, r.Text)
			return ok, true
		}
	case cmdSemHolders:
		// One character per slot, '1' where it is held here.
		if r.Type == '$' && len(r.Text) == len(c.x().keys) && c.x().bits != nil {
			c.x().bits.record(c.node, r.Text)
			return ok, true
		}
	case cmdProbe, cmdProbeMine:
		// OK: the key is absent here (−2), or (cmdProbeMine, Value
		// probeMine) holds the waiter's own grant token (−3); Refused: it
		// is held, Value its PTTL in ms (math.MaxUint64 for a key without
		// one, −1).
		if r.Type == ':' {
			switch {
			case r.N == -2:
				return ok, true
			case r.N == -3 && c.kind == cmdProbeMine:
				ok.Value = probeMine
				return ok, true
			case r.N >= 0:
				no.Value = uint64(r.N)
			default:
				no.Value = math.MaxUint64
			}
			return no, true
		}
	case cmdRank:
		// Value: 0 when id is not in the queue here, else its rank + 1.
		switch r.Type {
		case ':':
			ok.Value = uint64(r.N) + 1
			return ok, true
		case '_':
			return ok, true
		}
	case cmdAdopt:
		switch r.Type {
		case '$':
			return adoptReply(r.Text), true
		case '_':
			return no, true
		}
	case cmdExtendBatch:
		if r.Type == '$' && len(r.Text) == len(c.x().ext.keys) {
			c.x().ext.record(c.node, r.Text)
			return ok, true
		}
	case cmdLoad:
		return ok, true
	}
	return quorum.Reply{}, false
}
