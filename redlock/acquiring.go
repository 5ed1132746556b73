package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// An acquisition between its rounds: deciding each, fencing, and what
// is given back when one falls short (docs/design.md §4, §5).

// acquiring is an acquisition between its rounds: what deciding each of
// them, and releasing what they took, needs.
type acquiring struct {
	l       *Locker
	ctx     context.Context
	t       target
	token   string
	budget  validity.Budget
	start   time.Time
	mayHold []bool // the masters where our SET may be: asked, and not refused
	info    Acquisition
}

// settle decides a round: nil to go on, or the error after releasing
// every master that may hold the key.
func (a *acquiring) settle(op string, res quorum.Result, reason string) error {
	l, ctx, resource := a.l, a.ctx, a.t.resource
	info := &a.info
	info.Elapsed = l.env.now().Sub(a.start)
	info.Validity = a.budget.Validity(info.Elapsed)
	inv := l.invalidErr()
	if reason == "" && inv == nil && granted(res, a.budget, info.Elapsed) {
		return nil
	}
	l.releaseRound(ctx, a.t, a.token, a.mayHold, false, "")
	e := &Error{Op: op, Resource: resource, Need: l.need, Masters: info.Masters, Reason: reason, kind: ErrNotAcquired}
	// A master that refused the command for lack of permission is named,
	// and makes the error ErrInvalid too.
	e.cause = refusal(info.Masters)
	outcome := outNoQuorum
	switch {
	case inv != nil:
		l.tel.acquired(ctx, resource, outNoQuorum, *info, 0)
		return inv
	case reason == closedReason:
		e.kind, outcome = ErrClosed, outClosed
	case res.Err != nil:
		e.cause, outcome = context.Cause(ctx), outCanceled
	case res.Reached && reason == "":
		e.Reason, outcome = lateReason(info.Elapsed, a.budget), outExpired
	case res.Count(quorum.Refused) > 0:
		outcome = outHeld
		if e.held() && e.Reason == "" {
			e.Reason = "held by another owner"
		}
	}
	l.tel.acquired(ctx, resource, outcome, *info, 0)
	if l.log.Enabled(ctx, slog.LevelDebug) { // its attributes cost allocations
		l.log.DebugContext(ctx, "redlock: acquire failed", l.logResource(resource), "token", shortToken(a.token), l.logErr(e, resource))
	}
	l.noteRound(ctx, resource, e)
	return e
}

// fence is the lock's fence after the acquisition round res: one more
// than the largest counter the majority read, written back to a majority
// that still holds our token before the deadline (docs/design.md §5).
func (a *acquiring) fence(res quorum.Result) (uint64, error) {
	l, t := a.l, a.t
	var fence uint64
	reason := ""
	for _, r := range res.Replies {
		if r.Outcome == quorum.OK {
			if r.Value == math.MaxUint64 {
				reason = "the fence counter is exhausted (2^64−1): no larger fence can be issued"
			}
			fence = max(fence, r.Value+1)
		}
	}
	if l.betweenRounds != nil {
		l.betweenRounds()
	}
	if reason == "" && l.isClosing() {
		reason = closedReason
	}
	if reason != "" {
		return 0, a.settle("fence", res, reason)
	}
	wb := cmdWriteback
	if t.multi() {
		wb = cmdWritebackMulti
	}
	wres := l.round(a.ctx, l.env.now(), false, func(c *cmd) bool {
		t.set(c)
		c.kind, c.token, c.n = wb, a.token, fence
		return true
	})
	l.tel.round(a.ctx, l, "fence", wres)
	a.info.Masters = l.nodeResults(wres)
	if err := a.settle("fence", wres, ""); err != nil {
		return 0, err
	}
	return fence, nil
}

// noteAcquired tells the telemetry and the logs that lk was acquired, by
// a round or handed by the masters (§14.3).
func (l *Locker) noteAcquired(ctx context.Context, resource string, lk *Lock, info Acquisition) {
	l.tel.acquired(ctx, resource, outAcquired, info, lk.fence)
	l.noteShortValidity(ctx, resource, info)
	l.tel.hold(lk)
	l.noteRound(ctx, resource, nil)
	if l.log.Enabled(ctx, slog.LevelDebug) { // its attributes cost allocations
		l.log.DebugContext(ctx, "redlock: acquired", l.logResource(resource), "token", shortToken(lk.token), "fence", lk.fence, "elapsed", info.Elapsed, "validity", info.Validity)
	}
}

// granted is the rule an acquisition and an extension both pass to
// succeed: a majority agreed before ctx ended, and validity is left once
// it did (the window from the round's start, less the round's time).
func granted(res quorum.Result, b validity.Budget, elapsed time.Duration) bool {
	return res.Err == nil && res.Reached && b.Validity(elapsed) > 0
}

// lateReason says why a round that reached a majority failed granted.
func lateReason(elapsed time.Duration, b validity.Budget) string {
	return fmt.Sprintf("majority arrived after %v, past the validity window %v", elapsed, b.Window())
}

// closedReason marks an acquisition that found the Locker closing between
// its rounds.
const closedReason = "the Locker was closed during the acquisition"

func closedError(op, resource string) error {
	return &Error{Op: op, Resource: resource, kind: ErrClosed}
}
