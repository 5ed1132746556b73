package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlab/redlock/internal/quorum"
	"github.com/quorumlab/redlock/validity"
)

// wait is one Lock call's wait for a lock (docs/design.md §14): what it
// knows between events. lock runs it: a round when round is set, then a
// wait for the next event (the timer, a wake, ctx, Close), each event
// handled by one method that says what comes next.
type wait struct {
	l      *Locker
	ctx    context.Context
	t      target
	ttl    time.Duration
	budget validity.Budget

	w      *waiter // registered with the waker once a round found the lock held (nil before)
	timer  *time.Timer
	queued bool // waiters for t join its queue on the masters (Locker.queued)

	lk      *Lock // the outcome, once the wait is over
	err     error
	attempt int // rounds made

	// round: the next step is a round. joined: w has (as far as this
	// caller knows) an entry in the masters' queue; woke: this round
	// follows a wake; retried: once per wake.
	round, joined, woke, retried bool
	handed                       bool // acquired by the masters' grants, without a round
	giving                       bool // handed the key by a minority: give it back when the timer fires
	// ask: the next round is a waiting writer's on a wake, and asks its
	// place in the queue itself (rw_write.lua) instead of a ZRANK first.
	// everJoined: w has joined the queue at some time; a release that named
	// it took it off only the masters that agreed on the head.
	ask, everJoined bool
	probes          int    // polls of a queued waiter that found the key held
	suspect         bool   // its last poll found the key free, with itself at the head
	behind          uint64 // its place + 1 when its last poll found the key free, with waiters ahead
	held            bool   // the last round found the lock held on a majority
	// expires: when the holder's keys will have expired on a majority, as
	// the last read of their PTTLs told (zero: not known); expiring: the
	// timer is set for that instant.
	expires  time.Time
	expiring bool
	// passes: a reader's pass on each master, kept from round to round
	// (docs/design.md §19): it lets the reader by a waiting writer's
	// intent once the write it waited for has been granted.
	// For a writer, why each master refused its last round (rw_write.lua:
	// 1 another writer, 2 a live reader).
	passes []uint64
}

// step is what comes after an event.
type step uint8

const (
	stepWait step = iota // wait for the next event
	stepNext             // decide again at once: a round if wait.round
	stepDone             // the wait is over: wait.lk, or wait.err
)

// begin sets s up as a wait for t. Callers of this Locker already waiting for
// the key go first: a new caller queues behind them instead of racing the
// one the next release wakes (two rounds at once can split the masters and
// both fail).
func (s *wait) begin(l *Locker, ctx context.Context, t target, ttl time.Duration, budget validity.Budget) {
	*s = wait{l: l, ctx: ctx, t: t, ttl: ttl, budget: budget, round: true, queued: l.queued(t), held: true}
	if t.mode != 0 {
		s.passes = make([]uint64, len(l.streams))
	}
	switch {
	case t.mode != modeRead && l.wake.busy(t):
		// Behind this Locker's waiters, which its release wakes in
		// turn when it names nobody. (Not readers: they can all hold
		// at once, and nothing they wait for names one.)
		s.w, s.round = l.wake.wait(t), false
	case s.queued && l.wake.handingOn(t, l.opts.Retry.MaxDelay):
		// Behind the masters' queue: a round now would race the waiter
		// the last release named.
		s.w, s.round = l.wake.wait(t), false
		l.mayHand(t, s.w, ttl)
		l.join(ctx, t, s.w)
		s.joined, s.everJoined = true, true
	}
}

// run waits until the lock is acquired, or the wait ends otherwise.
func (s *wait) run() {
	for {
		next := stepWait
		if s.round {
			next = s.afterRound(s.tryRound())
		}
		if next == stepWait {
			next = s.next()
		}
		if next == stepDone {
			return
		}
	}
}

// tried is a round made: when it began, and the writer's entry in the
// queue that it carried.
type tried struct {
	began time.Time
	q     inQueue
}

// tryRound makes one acquisition round.
func (s *wait) tryRound() tried {
	l, t := s.l, s.t
	s.attempt++
	began := time.Now()
	var q inQueue
	if s.everJoined && t.mode == modeWriteWait {
		// Its grant takes it off the queue where it grants, also where a
		// release that named it popped another waiter (the masters
		// disagreed on the head).
		q = inQueue{id: s.w.id, ask: s.ask && s.joined}
	}
	s.ask = false
	s.lk, s.err = l.acquire(s.ctx, t, s.ttl, s.budget, s.passes, q)
	return tried{began, q}
}

// afterRound decides what follows round r.
func (s *wait) afterRound(r tried) step {
	l, t, ctx, err := s.l, s.t, s.ctx, s.err
	// A master refusing the Locker's commands (its ACL) is ErrInvalid
	// too: retrying cannot fix it.
	if err == nil || !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalid) {
		return stepDone
	}
	if ctx.Err() != nil {
		if !errors.Is(err, ctx.Err()) {
			s.err = fmt.Errorf("redlock: lock %q: %w (last attempt: %w)", t.resource, context.Cause(ctx), err)
		}
		return stepDone
	}
	if place := queuePlace(r.q, s.passes, l.need); place > 1 {
		// Behind other waiters on a majority: the key is the head's, as
		// the ZRANK this round replaces would have said; a round the
		// queue refused is not an attempt. Where the round was granted
		// all the same (the masters disagree on the head), its grant took
		// this waiter off the queue: back in, at its place.
		s.attempt--
		s.round, s.woke, s.behind = false, false, place
		if grantedSomewhere(err) {
			l.join(ctx, t, s.w)
		}
		return stepWait // a wake, or the poll (round is false)
	}
	if m := l.opts.Retry.MaxAttempts; m > 0 && s.attempt >= m {
		s.err = fmt.Errorf("redlock: gave up after %d attempts: %w", s.attempt, err)
		return stepDone
	}
	// A round that found the lock held by a majority waits to be woken by
	// name; one that split the votes (no majority anywhere) retries on the
	// short backoff, since nobody may be left to release.
	s.held = heldByMajority(err, l.need)
	if t.mode == modeWriteWait {
		// Held only by another writer: a round refused for live readers
		// waits for them to leave, which rw_unread.lua announces; a
		// missed announcement costs the short backoff, not a queued
		// waiter's long one, and there is no holder's expiry to date.
		s.held = writerHeld(s.passes, l.need)
	}
	rejoin := true
	if s.woke && s.queued && !s.retried {
		// Woken on the first master's announcement, the round may have
		// found others not yet released: retry at once if a majority has
		// released by now, or when it has (still off the queue: this
		// release woke it).
		s.retried = true
		now, later := l.wake.wakeOnMajority(s.w)
		if now {
			return stepNext
		}
		rejoin = !later
	}
	if !heldElsewhere(err) || !rejoin {
		return stepWait
	}
	if s.w == nil {
		// From now on a release of the key wakes this caller.
		s.w = l.wake.wait(t)
		l.mayHand(t, s.w, s.ttl)
	}
	if s.queued {
		// (Again:) a release may have taken it off the queue.
		l.join(ctx, t, s.w)
		s.joined, s.everJoined = true, true
		if !s.woke && l.wake.freedSince(t, r.began) {
			// Released meanwhile, with nobody named: this caller was not
			// yet waiting to be told.
			s.held = false
		}
	}
	if s.held && !t.multi() && t.mode != modeRead {
		// One read, on a failed round only: when the holder's keys
		// expire (a holder that dies releases nothing).
		var free bool
		free, s.expires = l.probe(ctx, t, s.w)
		if s.takeGrants() {
			return stepDone
		}
		// Handed the key by a minority whose messages were lost: wait a
		// little for the others, as on a wake.
		s.giving = l.wake.grants(s.w) > 0
		if free && !s.expires.IsZero() {
			// Gone from a majority between the round and this read:
			// expired (nobody will announce it), or released to a waiter
			// a release named, whose round is on its way. Look again once
			// such a round has had its NodeTimeout, not at once: a poll
			// now would mostly find that handoff in flight.
			s.expires = later(s.expires, time.Now().Add(l.opts.NodeTimeout))
		}
	}
	return stepWait
}

// takeGrants takes the lock a majority of masters handed the waiter
// (§14.3), if they did.
func (s *wait) takeGrants() bool {
	if s.lk = s.l.fromGrants(s.ctx, s.t, s.w, s.ttl, s.budget); s.lk == nil {
		return false
	}
	s.err, s.handed = nil, true
	return true
}

// delay is how long to wait for an event before the timer fires.
func (s *wait) delay() time.Duration {
	l := s.l
	n := max(s.attempt, 1)
	d := l.backoff(n)
	if s.joined && s.held && !s.woke && !s.suspect {
		// Woken by name: the timer only covers a lost wake, or a waiter
		// ahead that died in the queue. (A waiter whose woken round
		// failed retries soon: its release may not have reached every
		// master yet.)
		d = l.backoff(n + queuedSteps + s.probes)
	}
	// Wake on expiry (§14.2): at the instant the holder's keys will have
	// expired on a majority, if that comes before the backoff.
	s.expiring = false
	if !s.expires.IsZero() {
		if u := time.Until(s.expires); u < d {
			d, s.expiring = max(u, 0), true
		}
		s.expires = time.Time{}
	}
	if s.giving {
		// Jittered, so that two waiters each handed a minority do not
		// give back in step and trade their grants.
		d, s.expiring = l.opts.NodeTimeout+rand.N(l.opts.NodeTimeout+1), false
	}
	return d
}

// next waits for the next event and handles it.
func (s *wait) next() step {
	d := s.delay()
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	var woken <-chan struct{}
	if s.w != nil {
		woken = s.w.ch
	}
	select {
	case <-s.ctx.Done():
		return s.ended()
	case <-s.l.quit.Done():
		s.lk, s.err = nil, closedError("acquire", s.t.resource)
		return stepDone
	case <-s.timer.C:
		return s.timerFired()
	case <-woken:
		s.timer.Stop()
		return s.wakened()
	}
}

// ended: ctx ended while waiting.
func (s *wait) ended() step {
	if s.err == nil {
		s.err = &Error{Op: "acquire", Resource: s.t.resource, Need: s.l.need, Nodes: s.l.untried(), Reason: "waiting behind this Locker's other callers", kind: ErrNotAcquired, cause: context.Cause(s.ctx)}
	} else {
		s.err = fmt.Errorf("redlock: lock %q: waiting to retry: %w (last attempt: %w)", s.t.resource, context.Cause(s.ctx), s.err)
	}
	return stepDone
}

// timerFired: the backoff, the holder's expiry, or the give-back's wait
// ran out.
func (s *wait) timerFired() step {
	l, t, ctx := s.l, s.t, s.ctx
	if s.giving {
		return s.giveBackOrTake()
	}
	// The backoff covers a lost release message. Only the first waiter in
	// line needs to poll: the others are woken in turn.
	s.round = s.w == nil || l.wake.first(s.w)
	if s.round && s.joined && s.held && !s.woke {
		// A queued waiter's poll only asks whether the key is free on a
		// majority: a round at every poll would split the votes of the
		// handoffs in progress. Free twice, a short backoff apart (not a
		// handoff in flight): a round. Held: every fourth time, join
		// again, in case a release named it and the wake was lost.
		// Free: its place in the queue (§14.1 item 5) says whether the
		// key is its to take. Off the queue (a release named it; the wake
		// was lost): a round now. Behind another waiter: that waiter's,
		// unless the queue has not moved since its last poll that found
		// the key free (the waiters ahead are gone). Woken at the
		// holder's expiry (§14.2), the head takes the key at once: nobody
		// released it, so nobody was named.
		free, at := l.probe(ctx, t, s.w)
		if s.takeGrants() {
			return stepDone
		}
		if l.wake.grants(s.w) > 0 {
			// Handed the key by a minority, whose messages were lost: as
			// on a wake.
			s.giving, s.round = true, false
			return stepNext
		}
		s.polled(free, at)
	}
	s.woke, s.expiring = false, false
	return stepNext
}

// polled decides, from a queued waiter's poll (free, and when the key
// expires), whether its next step is a round.
func (s *wait) polled(free bool, at time.Time) {
	switch {
	case !free:
		s.suspect, s.round, s.behind, s.expires = false, false, 0, at
		if s.probes++; s.probes%4 == 0 {
			s.l.join(s.ctx, s.t, s.w)
		}
	case s.suspect:
		s.suspect = false
	default:
		switch r := s.l.rank(s.ctx, s.t, s.w); {
		case r == 0:
			s.behind = 0
		case r == 1 && s.expiring:
			s.suspect, s.behind = false, 0
		case r == 1:
			s.suspect, s.round, s.behind = true, false, 0
		case s.behind == 0 || r < s.behind:
			s.round, s.behind = false, r
		default:
			s.behind = 0
		}
	}
}

// giveBackOrTake: a waiter handed the key by a minority waited for the
// rest of its grants (§14.3).
func (s *wait) giveBackOrTake() step {
	l, t, ctx := s.l, s.t, s.ctx
	s.giving = false
	if s.takeGrants() {
		return stepDone
	}
	// No majority came: take the key with the grant token where it is
	// free (a master that lost it and its queue hands nothing on), and
	// count those too.
	l.complete(ctx, t, s.w)
	if s.takeGrants() {
		return stepDone
	}
	// Still no majority: give back, so that the masters that handed it the
	// key hand it on, and join again, at the same place. The grants that
	// followed its earlier joins no longer count.
	l.giveBack(ctx, t, s.w, true)
	l.join(ctx, t, s.w)
	s.joined, s.everJoined, s.round = true, true, false
	return stepNext
}

// wakened: a release named this waiter, or handed it the key.
func (s *wait) wakened() step {
	l, t, ctx := s.l, s.t, s.ctx
	if s.takeGrants() {
		return stepDone
	}
	if l.wake.grants(s.w) > 0 {
		// Handed the key by some masters, not yet a majority: the others'
		// grants are on their way, or went to another waiter (the masters
		// disagreed on the head). A round now would be refused where its
		// own grant is: wait a little, then give back what it has.
		s.giving, s.round = true, false
		return stepNext
	}
	s.round, s.woke, s.retried = true, true, false
	s.expires, s.expiring = time.Time{}, false // released: whoever holds it next has its own TTL
	if !s.joined {
		return stepNext
	}
	if l.wake.popped(s.w) {
		s.joined = false // the release that named it took it off
	} else if t.mode == modeWriteWait {
		// A writer's round asks its place itself: the same answer, one
		// round of the masters fewer.
		s.ask = true
	} else if r := l.rank(ctx, t, s.w); r > 1 {
		// Woken by a release that named nobody (a holder that did not
		// pass the queue, §14.1 item 2): the key is the head's, and a
		// round now would split its handoff. The head's wake is on its
		// way.
		s.round, s.woke, s.behind = false, false, r
	}
	return stepNext
}

// finish ends the wait: a caller still in the queue leaves it (one taken
// off by the release that woke it has left). A writer's grant took it off
// the masters that granted: the others are told, and Lock does not wait
// for them; also when a release named it, since that release may have
// popped another waiter on some masters.
func (s *wait) finish() {
	l, t, ctx, w, lk := s.l, s.t, s.ctx, s.w, s.lk
	if s.timer != nil {
		s.timer.Stop()
	}
	if w != nil {
		l.wake.done(w)
	}
	switch {
	case s.handed:
		// Its Unlock takes it off the queue where it still is.
	case w != nil && w.grant != nil && s.everJoined:
		// A master may have handed it the key: give that back (and on),
		// and leave, in one round.
		l.giveBack(ctx, t, w, false)
	case s.everJoined && lk != nil && t.mode == modeWriteWait:
		l.leaveWhere(ctx, t, w, func(i int) bool { return lk.acq.outcome(i) == quorum.OK })
	case s.joined || s.everJoined && t.mode == modeWriteWait:
		l.queueRound(ctx, t, w, cmdLeave)
	}
	if lk != nil && (w != nil || s.attempt > 1) {
		lk.waited = true // others may be waiting too: its release hands on
	}
}
