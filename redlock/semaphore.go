package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlab/redlock/internal/keys"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// maxPermits is the most permits a Semaphore has (1 024). Every
// acquisition round names each permit's key to every master, so its cost
// grows with the permits (docs/bench.md measures 32, 256 and 1 024).
const maxPermits = keys.MaxPermits

// Semaphore lets at most permits callers hold it at once, while a majority
// of masters is up and under the assumptions of docs/design.md §3 (the proof
// is §18). Each permit is a slot, a Redlock key of its own. The *Lock it
// returns holds one slot and works as a mutex's lock; its Resource is the
// semaphore's name and its Fence 0 (holders are concurrent). Every caller
// must name the same number of permits: a round that names another while the
// semaphore is in use fails with ErrInvalid.
type Semaphore struct {
	l       *Locker
	name    string
	stem    string
	permits int
	slots   []string // slot i+1's key: stem + ":s:" + (i+1)
}

// Semaphore returns the semaphore called name with permits permits (1 to
// maxPermits). The name follows the rules of a resource name; it does not
// share keys with a mutex or a read-write lock of the same name. A Locker
// with Options.RedsyncKeys refuses it (ErrInvalid: under that naming its
// keys could be a mutex's). It sends nothing: a permits mismatch is found
// by the first acquisition.
func (l *Locker) Semaphore(name string, permits int) (*Semaphore, error) {
	if permits <= 0 || permits > maxPermits {
		return nil, invalid(fmt.Sprintf("semaphore permits %d: want 1 to %d", permits, maxPermits))
	}
	stem, err := l.primitiveKey(name)
	if err != nil {
		return nil, err
	}
	s := &Semaphore{l: l, name: name, stem: stem, permits: permits, slots: make([]string, permits)}
	for i := range s.slots {
		s.slots[i] = stem + slotInfix + strconv.Itoa(i+1)
	}
	return s, nil
}

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// TryAcquire makes one acquisition round: it returns a *Lock on one
// permit when a majority of masters gave the caller the same slot with
// validity left, and otherwise an error wrapping ErrNotAcquired, after
// releasing whatever it took. WithTTL sets the lock's TTL.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("TryAcquire")
	}
	ttl, budget, err := s.l.ttlBudget(s.l.opts.TTL, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := s.l.tel.start(ctx, "TryAcquire", s.name)
	lk, err := s.acquire(ctx, ttl, budget)
	end(span, err)
	return lk, err
}

// Acquire retries TryAcquire's round until it succeeds, ctx ends, or the
// policy's MaxAttempts is spent. Between rounds it waits for a permit's
// release, announced by a majority of masters (the mutex's wake on
// release, docs/design.md §14, on every slot's key: one waiter of this
// Locker is woken per release), or at most the Locker's jittered backoff
// (Options.Retry): a permit that expires, or a release message lost, is
// found by the next round, at most MaxDelay later. Callers of one Locker
// wait in line: a new Acquire behind waiting ones makes no round until a
// release wakes it, and only the first in line polls on the backoff.
// Callers of different Lockers race for a released permit: one may pass
// another that began before it (no queue as the mutex's, §14.1). A
// mismatch of permits or a refused permission (ErrInvalid) is not retried.
func (s *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (lk *Lock, err error) {
	if ctx == nil {
		return nil, nilContext("Acquire")
	}
	l := s.l
	ttl, budget, err := l.ttlBudget(l.opts.TTL, opts)
	if err != nil {
		return nil, err
	}
	// The whole wait is one operation of the Locker's, as Lock's is:
	// Close waits for it to end, and ends its wait (l.quit)
	// (docs/design.md §9).
	if l.live.isClosed() || !l.enter() { // Shutdown or Close
		return nil, closedError("acquire", s.name)
	}
	defer l.ops.Done()
	ctx, span := l.tel.start(ctx, "Acquire", s.name)
	defer func() { end(span, err) }()
	var timer *time.Timer
	var w *waiter
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if w != nil {
			l.wake.done(w)
		}
	}()
	t := target{resource: s.name, key: s.slots[0], keys: s.slots}
	round := true
	if l.wake.busy(t) {
		// Behind this Locker's callers waiting for a permit, which
		// releases wake in turn: a round now would race the one the next
		// release wakes, and two rounds at once can split the masters so
		// that both fail (docs/design.md §14 item 3, §18.2).
		w, round = l.wake.wait(t), false
	}
	attempt := 0
	for {
		if round {
			attempt++
			lk, err = s.acquire(ctx, ttl, budget)
			if err == nil || !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalid) {
				return lk, err
			}
			if ctx.Err() != nil {
				if !errors.Is(err, ctx.Err()) {
					err = fmt.Errorf("redlock: acquire %q: %w (last attempt: %w)", s.name, context.Cause(ctx), err)
				}
				return nil, err
			}
			if m := l.opts.Retry.MaxAttempts; m > 0 && attempt >= m {
				return nil, fmt.Errorf("redlock: gave up after %d attempts: %w", attempt, err)
			}
			if w == nil && heldElsewhere(err) {
				// From now on a release of any slot wakes this caller.
				w = l.wake.wait(t)
			}
		}
		var woken <-chan struct{}
		if w != nil {
			woken = w.ch
		}
		switch l.env.sleep(ctx, l.quit, l.backoff(max(attempt, 1)), woken, &timer) {
		case wakeTimer:
			// The backoff covers a lost release message and a permit
			// that expired. Only the first waiter in line polls: the
			// others are woken in turn.
			round = w == nil || l.wake.first(w)
		default:
			// Woken; or ctx ended, or Close began: the round then fails
			// at once, naming why.
			round = true
		}
	}
}

// acquire is one round: each master takes the first free slot in this
// caller's order (a random rotation, so that callers spread over the
// slots), and the caller holds the slot a majority took for it. At most
// one slot can have a majority, since each master takes one.
func (s *Semaphore) acquire(ctx context.Context, ttl time.Duration, budget validity.Budget) (*Lock, error) {
	l := s.l
	if l.live.isClosed() || !l.enter() { // Shutdown or Close
		return nil, closedError("acquire", s.name)
	}
	defer l.ops.Done()
	if err := l.invalidErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "acquire", Resource: s.name, Need: l.need, Masters: l.untried(), kind: ErrNotAcquired, cause: context.Cause(ctx)}
	}
	token := l.newToken()
	k := s.permits
	order := make([]string, k)
	for j, r := 0, int(l.env.intN(int64(k))); j < k; j++ {
		order[j] = s.slots[(r+j)%k]
	}
	start := l.env.now()
	res := l.round(ctx, start, false, func(c *cmd) bool {
		c.kind, c.key, c.setMore().keys, c.token, c.n = cmdSemAcquire, s.stem, order, token, uint64(ttl.Milliseconds())
		return true
	})
	l.tel.round(ctx, l, "acquire", res)
	elapsed := l.env.now().Sub(start)
	info := Acquisition{Start: start, Elapsed: elapsed, TTL: ttl, Drift: budget.Drift(), SafetyMargin: l.opts.SafetyMargin,
		Validity: budget.Validity(elapsed), Masters: l.nodeResults(res)}
	for i, n := range info.Masters {
		if n.Err != nil && strings.Contains(n.Err.Error(), "permits mismatch") {
			info.Masters[i].Err = invalid(fmt.Sprintf("semaphore %q: %v: every caller must name the same permits (docs/design.md §18)", s.name, n.Err))
		}
	}
	votes := make([]int, k+1)
	for _, r := range res.Replies {
		if r.Outcome == quorum.OK && r.Value >= 1 && r.Value <= uint64(k) {
			votes[r.Value]++
		}
	}
	win := 0
	for j, v := range votes {
		if v >= l.need {
			win = j
		}
	}
	// won: the masters that may hold the winning slot for us (they took
	// it, or had not answered); rest: those that may hold another slot
	// for us, whose other slots are released at once (every slot, when
	// the round failed).
	won := make([]bool, len(res.Replies))
	rest := make([]bool, len(res.Replies))
	inv := l.invalidErr()
	ok := win > 0 && res.Err == nil && info.Validity > 0 && inv == nil
	for i, r := range res.Replies {
		// Failed may have run: its connection broke after the send.
		took := r.Outcome != quorum.Unavailable && r.Outcome != quorum.Refused
		won[i] = ok && took && (r.Outcome != quorum.OK || r.Value == uint64(win))
		rest[i] = took && (!ok || r.Outcome != quorum.OK || r.Value != uint64(win))
	}
	if s.giveBackOthers(ctx, token, order, win, ok, won, rest, budget.Deadline(start)) {
		ok, elapsed = false, l.env.now().Sub(start)
	}
	if !ok {
		e := &Error{Op: "acquire", Resource: s.name, Need: l.need, Masters: info.Masters, kind: ErrNotAcquired, cause: refusal(info.Masters)}
		outcome := outNoQuorum
		switch {
		case inv != nil:
			return nil, inv
		case res.Err != nil:
			e.cause, outcome = context.Cause(ctx), outCanceled
		case win > 0:
			e.Reason, outcome = lateReason(elapsed, budget), outExpired
		case res.Count(quorum.Refused) > 0:
			e.Reason, outcome = "every permit is held on the masters that refused", outHeld
		default:
			e.Reason = "no slot was taken by a majority"
		}
		l.tel.acquired(ctx, s.name, outcome, info, 0)
		return nil, e
	}
	lk := &Lock{locker: l, target: target{resource: s.name, key: order[win-1]}, token: token, mayHold: won, permits: k,
		ttl: ttl, budget: budget, deadline: budget.Deadline(start), acq: l.pack(info)}
	if !l.live.add(lk) {
		// Shutdown began during the round: a permit is a lock like any
		// other (docs/design.md §17), so give it back and fail.
		l.releaseRound(ctx, lk.target, token, won, false, "")
		l.tel.acquired(ctx, s.name, outClosed, info, 0)
		return nil, &Error{Op: "acquire", Resource: s.name, Need: l.need, Masters: info.Masters, Reason: closedReason, kind: ErrClosed}
	}
	l.tel.acquired(ctx, s.name, outAcquired, info, 0)
	l.tel.hold(lk)
	return lk, nil
}

// Holders returns how many permits are in use: the slots held on a
// majority of masters, read in one round that waits for every master
// (at most MasterTimeout). A slot held on fewer masters is not counted: no
// one holds it. It is a reading at one instant, for monitoring; it
// decides nothing. When fewer than a majority answer, it returns an error
// wrapping ErrNotAcquired.
func (s *Semaphore) Holders(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, nilContext("Holders")
	}
	l := s.l
	if !l.enter() {
		return 0, closedError("holders", s.name)
	}
	defer l.ops.Done()
	bits := &semBits{bits: make([]string, len(l.streams))}
	res := l.round(ctx, l.env.now(), true, func(c *cmd) bool {
		c.kind, c.key = cmdSemHolders, s.stem
		c.more = &cmdMore{keys: s.slots, bits: bits}
		return true
	})
	held := bits.take()
	if res.OK < l.need {
		return 0, &Error{Op: "holders", Resource: s.name, Need: l.need, Masters: l.nodeResults(res),
			Reason: "fewer than a majority of masters answered", kind: ErrNotAcquired, cause: refusal(l.nodeResults(res))}
	}
	n := 0
	for j := range s.permits {
		c := 0
		for i, r := range res.Replies {
			if r.Outcome == quorum.OK && len(held[i]) == s.permits && held[i][j] == '1' {
				c++
			}
		}
		if c >= l.need {
			n++
		}
	}
	return n, nil
}

// giveBackOthers releases token's slots other than the won one (win, 0
// when none: every slot) on the masters that may hold them (rest). When
// the acquisition succeeded (ok) and that release outlasted the validity
// left (deadline: slow masters answer within MasterTimeout), the won
// slot is given back too, so that no permit is handed out past its
// deadline (§2), and it reports true.
func (s *Semaphore) giveBackOthers(ctx context.Context, token string, order []string, win int, ok bool, won, rest []bool, deadline time.Time) (late bool) {
	l := s.l
	others := s.slots
	if ok {
		others = slices.DeleteFunc(slices.Clone(s.slots), func(k string) bool { return k == order[win-1] })
	}
	if len(others) == 0 || !slices.Contains(rest, true) {
		return false
	}
	l.releaseRound(ctx, target{resource: s.name, key: others[0], keys: others}, token, rest, false, "")
	if !ok || l.env.now().Before(deadline) {
		return false
	}
	l.releaseRound(ctx, target{resource: s.name, key: order[win-1]}, token, won, false, "")
	return true
}
