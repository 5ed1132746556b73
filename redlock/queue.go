package redlock

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// The queue of waiters on the masters and the hand-off of the key
// (docs/design.md §14.1, §14.3): the I/O the wait's state machine asks for
// (join, give-back, completion, poll, rank, leave), the grants a waiter
// counts into a lock, and what a failed round says to the machine. The
// scripts they run are scripts/release.lua (the pop and the hand-off),
// probe_mine.lua and rw_write.lua; the waker's side (who was named, which
// grants count) is the waker's (announce.go, grant.go).

// queued reports whether callers waiting for t join its queue on the
// masters: one resource, with a lock key that has a hash tag (the queue's
// key must share its slot on a Redis Cluster master).
func (l *Locker) queued(t target) bool {
	return !t.multi() && t.mode != modeRead && !l.opts.RedsyncKeys
}

// join puts w in t's queue on every master (ZADD NX: a caller already
// there keeps its place). A waiter a release may hand the key to, whose
// grant token was first sent more than an eighth of its TTL ago, first
// gives it back and joins with a new one: a handed lock counts its
// validity from the first join of its token (§14.3), which stays recent.
func (l *Locker) join(ctx context.Context, t target, w *waiter) {
	if l.wake.needsNewToken(w, l.env.now()) {
		l.giveBack(ctx, t, w, true)
	}
	l.queueRound(ctx, t, w, cmdJoin)
}

// giveBack releases w's grant token on every master, handing the key on
// where a release had handed it to w, and takes w off the queue, in one
// round. The grants of that token no longer count; with again (w goes on
// waiting), w's later joins carry a new token, which a master may hand
// the key to only after such a join.
func (l *Locker) giveBack(ctx context.Context, t target, w *waiter, again bool) {
	next := ""
	if again {
		next = l.newToken()
	}
	token := l.wake.token(w)
	old := l.wake.resetGrants(w, next)
	l.round(context.WithoutCancel(ctx), l.env.now(), false, func(c *cmd) bool {
		c.kind, c.key, c.token, c.pop, c.pass = cmdRelease, t.key, token, releaseHand, l.queueLife(releaseHand)
		c.setWaiter(old)
		return true
	})
}

// complete sends SET NX of w's grant token, with its TTL, to the masters
// that have not handed w the key, and counts each that sets it as a grant
// (docs/design.md §14.3 item 5): a master whose key is free hands it to
// nobody when it lost the queue too (restarted empty), or when no release
// reaches it, so a waiter handed a minority would otherwise give back and
// wait again while those masters stay free. The round is decided by the
// grants still missing for a majority, not by a majority of its own. The
// keys it sets live a TTL from their SET, later than the first join of
// the token, from which the lock's validity counts, and a give-back
// releases them with the rest.
func (l *Locker) complete(ctx context.Context, t target, w *waiter) {
	token, ttl, by := l.wake.grantSoFar(w)
	missing := l.need
	for _, g := range by {
		if g {
			missing--
		}
	}
	if by == nil || missing < 1 {
		return
	}
	res := l.roundFor(ctx, l.env.now(), false, l.opts.MasterTimeout, missing, func(c *cmd) bool {
		c.kind, c.key, c.token, c.n = cmdSetNX, t.key, token, ttl
		return !by[c.node]
	})
	for i, r := range res.Replies {
		if r.Outcome == quorum.OK && !by[i] {
			l.wake.countGrant(w, i, token)
		}
	}
}

// mayHand makes w a waiter that a release may hand t's key to
// (docs/design.md §14.3): one resource, a plain mutex, without fencing.
func (l *Locker) mayHand(t target, w *waiter, ttl time.Duration) {
	if !l.queued(t) || t.mode != 0 || l.opts.Fencing || !l.wake.hearsAll() {
		return
	}
	token := l.newToken()
	l.wake.setGrant(w, &grantState{token: token, digest: tokenDigest(token), ttl: uint64(ttl.Milliseconds()), by: make([]bool, len(l.streams))})
}

// fromGrants is the lock a majority of masters handed w, or nil.
func (l *Locker) fromGrants(ctx context.Context, t target, w *waiter, ttl time.Duration, budget validity.Budget) *Lock {
	if w == nil {
		return nil
	}
	start, by, ok := l.wake.grantedSince(w)
	if !ok || l.invalidErr() != nil || l.isClosing() {
		// (Two masters found to be one server would count one grant
		// twice: the Locker refuses every lock then. Once Close has
		// begun, no lock is handed out: lock gives the grants back.)
		return nil
	}
	elapsed := l.env.now().Sub(start)
	info := Acquisition{Start: start, Elapsed: elapsed, TTL: ttl, Drift: budget.Drift(), SafetyMargin: l.opts.SafetyMargin,
		Validity: budget.Validity(elapsed), Masters: make([]MasterResult, len(by))}
	mayHold := make([]bool, len(by))
	for i, g := range by {
		mayHold[i] = true
		info.Masters[i] = MasterResult{Addr: l.addrs[i], Outcome: quorum.Pending}
		if g {
			info.Masters[i].Outcome = quorum.OK
		}
	}
	if info.Validity <= 0 {
		return nil
	}
	lk := &Lock{locker: l, target: t, token: l.wake.token(w), queueID: l.wake.member(w, false, time.Time{}), mayHold: mayHold, ttl: ttl, budget: budget, deadline: budget.Deadline(start), acq: l.pack(info)}
	if !l.live.add(lk) {
		return nil
	}
	l.noteAcquired(ctx, t.resource, lk, info)
	return lk
}

// probe reports whether t's key may be free: not found held (PTTL) on a
// majority of masters. A probe that fails (a master not answering, or not
// allowing PTTL) says free, and the round that follows finds out. expires
// is when the key will have expired on a majority, if the holder does not
// extend it (zero when that cannot be told): wake on expiry, docs/design.md
// §14.2. It is dated also when the key is free: in the past when a
// majority no longer holds it (its keys expired, or were released, after
// the round that found it held and before this read); lock then looks
// again MasterTimeout later instead of on its backoff.
// For a waiter that a release may hand the key to (w.grant), it also reads
// whether the key holds its grant token, and counts those masters as its
// grants (docs/design.md §14.3).
func (l *Locker) probe(ctx context.Context, t target, w *waiter) (free bool, expires time.Time) {
	start := l.env.now()
	token := ""
	if w != nil && w.grant != nil {
		token = w.grant.token
	}
	res := l.round(ctx, start, false, func(c *cmd) bool {
		c.kind, c.key = cmdProbe, t.key
		if token != "" {
			c.kind, c.token = cmdProbeMine, token
		}
		return true
	})
	if token != "" {
		for i, r := range res.Replies {
			if r.Outcome == quorum.OK && r.Value == probeMine {
				l.wake.countGrant(w, i, token)
			}
		}
	}
	free = res.Count(quorum.Refused) < l.need
	return free, expiresAt(res, start, l.need, time.Millisecond+l.opts.DriftConstant)
}

// rank is w's place in t's queue + 1 on a majority of masters (the
// majority's highest), 0 when it is off the queue on a majority, and 1
// when too few masters answered (as if at the head).
func (l *Locker) rank(ctx context.Context, t target, w *waiter) uint64 {
	member := l.wake.member(w, false, time.Time{})
	res := l.round(ctx, l.env.now(), false, func(c *cmd) bool {
		c.kind, c.key, c.token = cmdRank, t.key, member
		return true
	})
	var v []uint64
	for _, r := range res.Replies {
		if r.Outcome == quorum.OK {
			v = append(v, r.Value)
		}
	}
	return majorityPlace(v, l.need)
}

// majorityPlace is, of the places + 1 that masters gave (v, sorted in
// place), the majority's highest: the need-th lowest; 1 (as if at the
// head) when fewer than need masters gave one.
func majorityPlace(v []uint64, need int) uint64 {
	if len(v) < need {
		return 1
	}
	slices.Sort(v)
	return v[need-1]
}

// inQueue is a waiting writer's entry in the masters' queue, sent with its
// round (rw_write.lua): id is its waiter's id ("" when it is not in the
// queue), and a master that grants the round takes it off the queue; with
// ask, a master where other waiters are ahead of it refuses the round.
type inQueue struct {
	id  string
	ask bool
}

// queuePlace is, for a round that asked its place (q.ask), the place + 1
// of the writer in the queue as rank reads it: the majority's highest of
// the masters that answered, 1 where a master granted or refused for
// another reason (it was at the head there, off the queue, or the writer
// key decided first), and 1 when too few answered. 0 when q did not ask.
func queuePlace(q inQueue, why []uint64, need int) uint64 {
	if !q.ask {
		return 0
	}
	var v []uint64
	for _, x := range why {
		switch {
		case x == whyNoAnswer:
		case x > 2:
			v = append(v, x-1) // rw_write.lua: 2 + rank
		default:
			v = append(v, 1)
		}
	}
	return majorityPlace(v, need)
}

// whyNoAnswer marks, in a writer's why per master, a master that neither
// granted nor refused its round.
const whyNoAnswer = math.MaxUint64

// grantedSomewhere reports whether a master granted the failed round
// (its grant took the waiter off the queue there). One whose reply had
// not come when the round was decided is not counted: a round refused by
// its place is refused on a majority, and a stray grant's removal is
// mended by the next join (every fourth poll).
func grantedSomewhere(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Count(quorum.OK) > 0
}

// leaveWhere takes w off t's queue on the masters where the acquisition
// did not succeed (granted, by master index), without waiting for them:
// those where it did took it off in the granting script.
func (l *Locker) leaveWhere(ctx context.Context, t target, w *waiter, granted func(i int) bool) {
	// Every master that granted is skipped, a majority: the round is
	// decided at once, and the replies come back to nobody.
	l.round(context.WithoutCancel(ctx), l.env.now(), false, func(c *cmd) bool {
		c.kind, c.key, c.token = cmdLeave, t.key, w.id
		return !granted(c.node)
	})
}

// queueRound sends w's join or leave to every master and waits for a
// majority, within MasterTimeout. Its outcome does not matter to the lock:
// the queue only decides whom a release wakes.
func (l *Locker) queueRound(ctx context.Context, t target, w *waiter, kind cmdKind) {
	start := l.env.now()
	member := l.wake.member(w, kind == cmdJoin, start)
	life := w.life
	if life == 0 {
		// Never a PEXPIRE of 0, which would delete the queue.
		life = uint64(l.memberLife(l.opts.TTL).Milliseconds())
	}
	// The waiter's age on this process's monotonic clock, and the instant
	// it began on its wall clock: each master scores the member that
	// instant moved to within a MasterTimeout of its own reckoning (TIME
	// less the age), so masters order their queues alike while the hosts'
	// clocks agree, and a host whose clock does not gains or loses at most
	// a MasterTimeout in line (docs/design.md §14.1 item 1).
	age := uint64(max(start.Sub(w.began), 0).Microseconds())
	wall := uint64(max(w.began.UnixMicro(), 0))
	slack := uint64(l.opts.MasterTimeout.Microseconds())
	l.round(context.WithoutCancel(ctx), start, false, func(c *cmd) bool {
		c.kind, c.key, c.token, c.n, c.pass = kind, t.key, member, age, life
		m := c.setMore()
		m.wall, m.slack = wall, slack
		return true
	})
}

// memberLife is how long a master keeps a waiter's queue past its last
// join (join.lua; docs/design.md §14.1 item 7): the lock's
// TTL, or, when longer, twice the longest a live waiter goes between
// joins while the key is held (every fourth poll, each at most MaxDelay
// after the last, and its reads at most MasterTimeout).
func (l *Locker) memberLife(ttl time.Duration) time.Duration {
	return max(ttl, 8*(l.opts.Retry.MaxDelay+l.opts.MasterTimeout))
}

// queueLife is what a release that may hand the key itself (releaseHand)
// gives a queue it puts a head back into (release.lua): the member's life
// at the Locker's TTL. 0 for other releases, which put nothing back.
func (l *Locker) queueLife(pop releaseQueue) uint64 {
	if pop < releaseHand {
		return 0
	}
	return uint64(l.memberLife(l.opts.TTL).Milliseconds())
}

// heldElsewhere reports whether a failed round found the lock held by
// another owner on some master: worth waiting for its release.
func heldElsewhere(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Count(quorum.Refused) > 0
}

// writerHeld reports whether a writer's round was refused by another
// writer's key on a majority of masters (why, per master: acquire's
// passes).
func writerHeld(why []uint64, need int) bool {
	n := 0
	for _, v := range why {
		if v == 1 {
			n++
		}
	}
	return n >= need
}

// heldByMajority reports whether a failed round found the lock held by
// other owners on a majority of masters.
func heldByMajority(err error, need int) bool {
	var e *Error
	return errors.As(err, &e) && e.Count(quorum.Refused) >= need
}
