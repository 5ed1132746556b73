package redlock

import (
	"context"
	"fmt"
	"math"
	"slices"

	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// What a Locker does (the Locker is declared in lockerstate.go, its
// constructors are in newlocker.go): what it tells of its masters (Stats,
// SustainableTTL), Close, and its acquisitions: TryLock, Lock and their
// All forms, the targets they check, and the round that acquires.

// enter registers an operation, unless the Locker is closing.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.ops.Add(1)
	return true
}

func (l *Locker) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

func (l *Locker) invalidErr() error { return l.ids.err() }

// Options returns the options in force, defaults filled in.
func (l *Locker) Options() Options { return l.opts }

// Stats returns what the Locker knows about each master, by index.
func (l *Locker) Stats() []MasterStats {
	out := make([]MasterStats, len(l.streams))
	for i, s := range l.streams {
		out[i] = s.stats()
		out[i].RoundP50, out[i].RoundP99 = l.pace.masters[i].quantiles()
	}
	return out
}

// SustainableTTL is the smallest TTL this Locker can keep a lock with, by
// the rule of docs/choosing.md ("Sizing a TTL"), from the slowest master's
// recent p99 answer time (Stats): the validity window must hold nine such
// rounds (a third of it, where the keeper extends, holds three) and three
// NodeTimeouts (a round that fails, and a retry), after drift and
// SafetyMargin. It is rounded up to a whole millisecond, and it changes as
// the masters do: a guide for choosing Options.TTL, not a setting.
func (l *Locker) SustainableTTL() time.Duration {
	var p99 time.Duration
	for i := range l.pace.masters {
		_, q := l.pace.masters[i].quantiles()
		p99 = max(p99, q)
	}
	w := max(9*p99, 3*l.opts.MasterTimeout) + l.opts.SafetyMargin + l.opts.DriftConstant
	ttl := time.Duration(math.Ceil(float64(w) / (1 - l.opts.DriftFactor)))
	return (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Close makes new operations fail with ErrClosed, waits for the ones in
// progress (each round is bounded by MasterTimeout; an acquisition caught
// between its two fenced rounds fails and releases what it took; a Lock
// that is waiting stops waiting, fails with ErrClosed, and first takes its
// place in the masters' queue, and any key they handed it, back), then
// closes the connections. Locks already handed out can no longer be
// extended or released through this Locker: Extend and Unlock return an
// error wrapping ErrClosed, and the keys stay until their TTL. Releases
// still waiting for a stalled master are dropped: those keys too expire
// with their TTL. On the plain path Close also waits for a batch stuck on
// a stalled master, up to the client's ReadTimeout. Close is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closing = true
	l.endQuit()
	l.mu.Unlock()
	l.ops.wait(l.env)
	l.wake.close()
	for _, s := range l.streams {
		s.close()
	}
	l.tel.close()
	l.closeOwnedOnce.Do(func() { closeOwned(l.given) })
	l.log.Info("redlock: locker closed; locks not unlocked stay on the masters until their TTL", "masters", len(l.masters))
	return nil
}

// TryLock makes one acquisition round for resource: it asks every master at
// once and returns as soon as a majority granted the lock with validity
// left, or as soon as that became impossible. On failure every master is
// released before TryLock returns, and the error wraps ErrNotAcquired (and
// ctx's error if ctx ended first); errors.As gives an *Error with the
// outcome on each master. WithTTL sets this lock's TTL.
func (l *Locker) TryLock(ctx context.Context, resource string, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("TryLock")
	}
	t, err := l.target(resource)
	if err != nil {
		return nil, err
	}
	return l.tryLock(ctx, "TryLock", t, opts)
}

// TryLockAll is TryLock for several resources at once: all of them or none.
// Each master grants the whole set or nothing, atomically (one script per
// master), and the lock is acquired when a majority granted it, with one
// validity for the set. Its Fence, with Options.Fencing, is larger than
// every earlier fence of every resource in the set. Extend and Unlock act
// on the whole set. The order of resources does not matter (they are
// sorted), and a resource may not be listed twice.
//
// Since no caller ever holds part of a set while waiting for the rest,
// callers asking for overlapping sets in different orders cannot
// deadlock. The resources' keys must be able to share a script: when a
// master is a Redis Cluster, resources whose keys hash to different slots
// are refused with ErrInvalid before anything is sent (with ViaClient,
// where the Locker does not see the cluster, that master answers
// CROSSSLOT and counts as Failed); with RedsyncKeys, give them a common
// hash tag, or lock them one by one in a fixed order.
func (l *Locker) TryLockAll(ctx context.Context, resources []string, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("TryLockAll")
	}
	t, err := l.targetAll(resources)
	if err != nil {
		return nil, err
	}
	return l.tryLock(ctx, "TryLockAll", t, opts)
}

func (l *Locker) tryLock(ctx context.Context, op string, t target, opts []LockOption) (*Lock, error) {
	ttl, budget, err := l.ttlBudget(l.opts.TTL, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := l.tel.start(ctx, op, t.resource)
	lk, err := l.acquire(ctx, t, ttl, budget, nil, inQueue{})
	end(span, err)
	return lk, err
}

// Lock acquires resource, retrying failed rounds until it succeeds, ctx
// ends, or the policy's MaxAttempts is spent. A round that found the lock
// held waits for the holder's release: the release publishes on the
// masters, and Lock retries as soon as a majority of them say the key is
// free. Jittered exponential backoff (Options.Retry) bounds every wait, so
// a release message that is lost (or never sent: a holder whose lock
// expired) delays the retry by at most the backoff. When ctx ends, the
// error satisfies errors.Is(err, ctx.Err()). An attempt refused for lack
// of permission (errors.Is(err, ErrInvalid)) is not retried. WithTTL sets
// this lock's TTL.
func (l *Locker) Lock(ctx context.Context, resource string, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("Lock")
	}
	t, err := l.target(resource)
	if err != nil {
		return nil, err
	}
	return l.lock(ctx, "Lock", t, opts)
}

// LockAll is Lock for several resources at once, all or none (see
// TryLockAll): it retries TryLockAll's round, waking on the release of any
// of the resources.
func (l *Locker) LockAll(ctx context.Context, resources []string, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("LockAll")
	}
	t, err := l.targetAll(resources)
	if err != nil {
		return nil, err
	}
	return l.lock(ctx, "LockAll", t, opts)
}

func (l *Locker) lock(ctx context.Context, op string, t target, opts []LockOption) (lk *Lock, err error) {
	ttl, budget, err := l.ttlBudget(l.opts.TTL, opts)
	if err != nil {
		return nil, err
	}
	// The whole wait is one operation of the Locker's: Close waits for it
	// to end, and ends its wait (l.quit), so that what the waiter left on
	// the masters (its queue member, keys handed to its grant token) is
	// taken back before the connections close (docs/design.md §9).
	if l.live.isClosed() || !l.enter() { // Shutdown or Close
		return nil, closedError("acquire", t.resource)
	}
	defer l.ops.Done()
	ctx, span := l.tel.start(ctx, op, t.resource)
	d := l.newWaitDriver(ctx, t, ttl, budget)
	defer func() {
		l.tel.lockAttempts(ctx, d.m.Attempts(), t.resource)
		end(span, err)
	}()
	d.run()
	if d.lk != nil && d.lk.isReleased() {
		// Our own Shutdown released the lock while the wait ended (the
		// lock is registered when its round decides, and the wait then
		// leaves the queue): the acquisition fails, as one in its round
		// does (§17).
		return nil, closedError("acquire", t.resource)
	}
	return d.lk, d.err
}

// maxResources is the most resources one TryLockAll or LockAll takes.
const maxResources = 256

func (l *Locker) target(resource string) (target, error) {
	if err := l.opts.checkName(resource); err != nil {
		return target{}, err
	}
	return target{resource: resource, key: l.opts.keyFor(resource)}, nil
}

func (l *Locker) targetAll(resources []string) (target, error) {
	switch {
	case len(resources) == 0:
		return target{}, invalid("no resources to lock")
	case len(resources) > maxResources:
		return target{}, invalid(fmt.Sprintf("%d resources, over the limit of %d per lock", len(resources), maxResources))
	}
	rs := slices.Clone(resources)
	slices.Sort(rs)
	for i, r := range rs {
		if err := l.opts.checkName(r); err != nil {
			return target{}, err
		}
		if i > 0 && rs[i-1] == r {
			return target{}, invalid(fmt.Sprintf("resource %q is listed twice", r))
		}
	}
	if len(rs) == 1 {
		return l.target(rs[0])
	}
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = l.opts.keyFor(r)
	}
	if l.hasClusterMaster() {
		// One script per master takes every key: on a Redis Cluster they
		// must share a hash slot, or the master answers CROSSSLOT.
		for i, k := range keys {
			if keySlot(k) != keySlot(keys[0]) {
				return target{}, invalid(fmt.Sprintf("resources %q and %q hash to different slots (%d, %d), and a master is a Redis Cluster: one lock's keys must share a slot there (docs/design.md §13)",
					rs[0], rs[i], keySlot(keys[0]), keySlot(k)))
			}
		}
	}
	return target{resource: rs[0], key: keys[0], resources: rs, keys: keys}, nil
}

// hasClusterMaster reports whether a master is a Redis Cluster served
// shard by shard.
func (l *Locker) hasClusterMaster() bool {
	for _, p := range l.streams {
		if p.cluster() {
			return true
		}
	}
	return false
}

func (l *Locker) backoff(attempt int) time.Duration {
	p := l.opts.Retry
	// MinDelay·2^(n−1), capped at MaxDelay without ever computing a
	// product that could overflow: the shift is taken only when
	// MinDelay ≤ MaxDelay / 2^(n−1).
	d := p.MaxDelay
	if n := attempt - 1; n >= 0 && n < 63 && p.MinDelay <= p.MaxDelay>>n {
		d = p.MinDelay << n
	}
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(l.env.intN(int64(d/2+1)))
}

// acquire makes one acquisition round. passes, for an RWMutex's Lock or
// RLock (nil otherwise), holds for a reader its pass on each master
// (rw_read.lua): sent with the round, and replaced by the pass of every
// master that refuses it; for a writer, why each master refused it (0 it
// did not). q is a waiting writer's entry in the masters' queue.
func (l *Locker) acquire(ctx context.Context, t target, ttl time.Duration, budget validity.Budget, passes []uint64, q inQueue) (*Lock, error) {
	resource := t.resource
	if l.live.isClosed() || !l.enter() { // Shutdown or Close
		return nil, closedError("acquire", resource)
	}
	defer l.ops.Done()
	if err := l.invalidErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "acquire", Resource: resource, Need: l.need, Masters: l.untried(), kind: ErrNotAcquired, cause: context.Cause(ctx)}
	}
	token := l.newToken()
	ms := uint64(ttl.Milliseconds())
	kind := cmdSetNX
	switch {
	case t.multi():
		kind = cmdAcquireMulti
	case t.mode != 0:
		kind = t.mode.acquireKind()
	case l.opts.Fencing:
		kind = cmdAcquireFenced
	}
	start := l.env.now()
	res := l.round(ctx, start, false, func(c *cmd) bool {
		t.set(c)
		c.kind, c.token, c.n, c.fenced = kind, token, ms, l.opts.Fencing
		if passes != nil {
			c.pass = passes[c.node]
		}
		c.ask = q.ask
		c.setWaiter(q.id)
		return true
	})
	// The masters where our SET may be: asked, and not refused.
	mayHold := make([]bool, len(res.Replies))
	for i, r := range res.Replies {
		mayHold[i] = r.Outcome != quorum.Unavailable && r.Outcome != quorum.Refused
		switch {
		case passes == nil:
		case r.Outcome == quorum.Refused:
			passes[i] = r.Value
		case t.mode != modeRead && r.Outcome != quorum.OK:
			passes[i] = whyNoAnswer
		case t.mode != modeRead:
			passes[i] = 0
		}
	}
	l.tel.round(ctx, l, "acquire", res)
	a := acquiring{l: l, ctx: ctx, t: t, token: token, budget: budget, start: start, mayHold: mayHold,
		info: Acquisition{Start: start, TTL: ttl, Drift: budget.Drift(), SafetyMargin: l.opts.SafetyMargin, Masters: l.nodeResults(res)}}
	if err := a.settle("acquire", res, ""); err != nil {
		return nil, err
	}
	var fence uint64
	if l.opts.Fencing && t.mode != modeRead {
		var err error
		if fence, err = a.fence(res); err != nil {
			return nil, err
		}
	}
	lk := &Lock{locker: l, target: t, token: token, fence: fence, mayHold: mayHold, ttl: ttl, budget: budget, deadline: budget.Deadline(start), acq: l.pack(a.info)}
	if !l.live.add(lk) { // Shutdown began during the round: give it back
		return nil, a.settle("acquire", res, closedReason)
	}
	l.noteAcquired(ctx, t.resource, lk, a.info)
	return lk, nil
}
