package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlab/redlock/internal/wait"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// waitDriver runs one Lock call's wait (docs/design.md §14): the state
// machine of internal/wait decides, and the driver does what it asks (a
// round, a join, a poll, ...) with the Locker's connections and real
// timers, and tells it the outcome with the time. It is also the
// machine's wait.Local: the Locker's waker, read and told in memory.
type waitDriver struct {
	l      *Locker
	ctx    context.Context
	t      target
	ttl    time.Duration
	budget validity.Budget
	m      wait.Machine

	w     *waiter // registered with the waker (nil before)
	timer *time.Timer
	lk    *Lock // the outcome: the lock, or the last round's error
	err   error
	// passes: a reader's pass on each master, kept from round to round
	// (docs/design.md §19): it lets the reader by a waiting writer's
	// intent once the write it waited for has been granted. For a
	// writer, why each master refused its last round (rw_write.lua: 1
	// another writer, 2 a live reader).
	passes []uint64
}

// newWaitDriver sets up the wait for t.
func (l *Locker) newWaitDriver(ctx context.Context, t target, ttl time.Duration, budget validity.Budget) *waitDriver {
	d := &waitDriver{l: l, ctx: ctx, t: t, ttl: ttl, budget: budget}
	if t.mode != 0 {
		d.passes = make([]uint64, len(l.streams))
	}
	d.m = wait.New(wait.Config{
		Target: wait.Target{Queued: l.queued(t), Reader: t.mode == modeRead, Writer: t.mode == modeWriteWait, Multi: t.multi()},
		Need:   l.need, MaxAttempts: l.opts.Retry.MaxAttempts, MasterTimeout: l.opts.MasterTimeout,
	}, d)
	return d
}

// run drives the wait to its end, then takes back what the waiter left on
// the masters.
func (d *waitDriver) run() {
	l, t := d.l, d.t
	busy := t.mode != modeRead && l.wake.busy(t)
	handingOn := !busy && l.queued(t) && l.wake.handingOn(t, l.opts.Retry.MaxDelay)
	a := d.m.Start(d.l.env.now(), busy, handingOn)
	for a.Kind != wait.Done {
		a = d.do(a)
	}
	d.ended(a.End)
	d.finish()
}

// do performs a and returns what the machine says next.
func (d *waitDriver) do(a wait.Action) wait.Action {
	l, t, ctx := d.l, d.t, d.ctx
	switch a.Kind {
	case wait.Round:
		var q inQueue
		if a.InQueue {
			q = inQueue{id: d.w.id, ask: a.Ask}
		}
		d.lk, d.err = l.acquire(ctx, t, d.ttl, d.budget, d.passes, q)
		return d.m.RoundDone(d.l.env.now(), d.roundResult(q))
	case wait.Join:
		l.join(ctx, t, d.w)
		return d.m.JoinDone(d.l.env.now())
	case wait.Probe:
		free, expires := l.probe(ctx, t, d.w)
		return d.m.ProbeDone(d.l.env.now(), free, expires)
	case wait.Rank:
		r := l.rank(ctx, t, d.w)
		return d.m.RankDone(d.l.env.now(), r)
	case wait.Complete:
		l.complete(ctx, t, d.w)
		return d.m.CompleteDone(d.l.env.now())
	case wait.GiveBack:
		l.giveBack(ctx, t, d.w, false)
		if a.Again {
			l.wake.clearGrant(d.w) // named from now on (§14.3 item 5)
		}
		return d.m.GiveBackDone(d.l.env.now())
	case wait.Sleep:
		return d.sleep(a.Delay)
	}
	return wait.Action{Kind: wait.Done, End: wait.EndInvalid}
}

// roundResult tells the machine what the round just made says.
func (d *waitDriver) roundResult(q inQueue) wait.RoundResult {
	err, need := d.err, d.l.need
	// A master refusing the Locker's commands (its ACL) is ErrInvalid
	// too: retrying cannot fix it.
	if err == nil || !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalid) {
		return wait.RoundResult{Final: true, Acquired: err == nil}
	}
	if d.ctx.Err() != nil {
		return wait.RoundResult{CtxEnded: true}
	}
	return wait.RoundResult{
		Place:            queuePlace(q, d.passes, need),
		GrantedSomewhere: grantedSomewhere(err),
		HeldByMajority:   heldByMajority(err, need),
		WriterHeld:       d.t.mode == modeWriteWait && writerHeld(d.passes, need),
		HeldElsewhere:    heldElsewhere(err),
	}
}

// sleep waits for the next event: the timer after delay, a wake, ctx, or
// Close.
func (d *waitDriver) sleep(delay time.Duration) wait.Action {
	var woken <-chan struct{}
	if d.w != nil {
		woken = d.w.ch
	}
	e := d.l.env
	switch e.sleep(d.ctx, d.l.quit, delay, woken, &d.timer) {
	case wakeCtx:
		return d.m.CtxEnded(e.now())
	case wakeClosed:
		return d.m.Closed(e.now())
	case wakeWoken:
		return d.m.Woken(e.now())
	}
	return d.m.TimerFired(e.now())
}

// ended sets the wait's outcome from how it ended.
func (d *waitDriver) ended(e wait.End) {
	ctx, resource := d.ctx, d.t.resource
	switch e {
	case wait.EndRound, wait.EndHanded:
		// The round's lock or error; or the lock TakeGrants took.
	case wait.EndRoundCtx:
		if !errors.Is(d.err, ctx.Err()) {
			d.err = fmt.Errorf("redlock: lock %q: %w (last attempt: %w)", resource, context.Cause(ctx), d.err)
		}
	case wait.EndGaveUp:
		d.err = fmt.Errorf("redlock: gave up after %d attempts: %w", d.m.Attempts(), d.err)
	case wait.EndCtx:
		if d.err == nil {
			d.err = &Error{Op: "acquire", Resource: resource, Need: d.l.need, Masters: d.l.untried(), Reason: "waiting behind this Locker's other callers", kind: ErrNotAcquired, cause: context.Cause(ctx)}
		} else {
			d.err = fmt.Errorf("redlock: lock %q: waiting to retry: %w (last attempt: %w)", resource, context.Cause(ctx), d.err)
		}
	case wait.EndClosed:
		d.lk, d.err = nil, closedError("acquire", resource)
	default:
		d.lk, d.err = nil, fmt.Errorf("redlock: lock %q: internal error: the wait ended with %d", resource, e)
	}
}

// finish ends the wait: the waiter leaves the waker, and takes back from
// the masters what the machine says (its place in the queue, a key handed
// to its grant token).
func (d *waitDriver) finish() {
	l, t, ctx, w, lk := d.l, d.t, d.ctx, d.w, d.lk
	if d.timer != nil {
		d.timer.Stop()
	}
	if w != nil {
		l.wake.done(w)
	}
	switch d.m.Leave() {
	case wait.LeaveGiveBack:
		l.giveBack(ctx, t, w, false) // give back (and on), and leave, in one round
	case wait.LeaveWhere:
		l.leaveWhere(ctx, t, w, func(i int) bool { return lk.acq.outcome(i) == quorum.OK })
	case wait.LeaveQueue:
		l.queueRound(ctx, t, w, cmdLeave)
	case wait.LeaveUnnamed:
		// A release named it, and took it off the queue where the masters
		// agreed on the head; but a join of its still on its way to a
		// master can land after the release there, and put it back.
		// Without a lock, it leaves every master (after its joins: each
		// stream keeps its order). With one, the lock's release takes its
		// member off (queueID, below) where the release goes; it leaves
		// the others now, and the round does not wait: they are a
		// minority.
		if lk == nil {
			l.queueRound(ctx, t, w, cmdLeave)
		} else if slices.Contains(lk.mayHold, false) {
			l.leaveWhere(ctx, t, w, func(i int) bool { return lk.mayHold[i] })
		}
	}
	if lk == nil {
		return
	}
	// Under mu: the lock is registered (live) already, and a Shutdown
	// may be releasing it.
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if d.m.Waited() {
		lk.waited = true // others may be waiting too: its release hands on
	}
	if lk.queueID == "" && w != nil && d.m.EverJoined() {
		// A join of its may have reached a master after the release that
		// named it there: its release takes the member off (release.lua).
		lk.queueID = l.wake.member(w, false, time.Time{})
	}
}

// The machine's wait.Local: the Locker's waker, in memory.

func (d *waitDriver) Register(mayHand bool) bool {
	d.w = d.l.wake.wait(d.t)
	d.w.life = uint64(d.l.memberLife(d.ttl).Milliseconds())
	if mayHand {
		d.l.mayHand(d.t, d.w, d.ttl)
	}
	return d.w.grant != nil
}

func (d *waitDriver) Grants() int { return d.l.wake.grants(d.w) }

func (d *waitDriver) TakeGrants() bool {
	d.lk = d.l.fromGrants(d.ctx, d.t, d.w, d.ttl, d.budget)
	if d.lk == nil {
		return false
	}
	d.err = nil
	return true
}

func (d *waitDriver) FirstInLine() bool { return d.l.wake.first(d.w) }

func (d *waitDriver) Popped() bool { return d.l.wake.takePopped(d.w) }

func (d *waitDriver) WakeOnMajority() (now, later bool) { return d.l.wake.wakeOnMajority(d.w) }

func (d *waitDriver) FreedSince(t time.Time) bool { return d.l.wake.freedSince(d.t, t) }

func (d *waitDriver) Backoff(n int) time.Duration { return d.l.backoff(n) }
