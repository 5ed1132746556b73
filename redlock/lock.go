package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// What a held Lock does (the Lock is declared in lockstate.go): its
// accessors, Extend and Unlock.

func (lk *Lock) isReleased() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.released
}

// Resource returns the resource name; for a lock on several resources
// (TryLockAll, LockAll), the first of them in sorted order.
func (lk *Lock) Resource() string { return lk.resource }

// Resources returns every resource the lock holds, sorted (one for
// TryLock and Lock).
func (lk *Lock) Resources() []string {
	if lk.resources == nil {
		return []string{lk.resource}
	}
	return slices.Clone(lk.resources)
}

// TTL returns the lock's TTL: Options.TTL, or the one set by WithTTL when
// it was acquired or last extended.
func (lk *Lock) TTL() time.Duration {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.ttl
}

// Token returns the random value stored on the masters for this lock.
func (lk *Lock) Token() string { return lk.token }

// Fence returns the lock's fencing token: larger than the fence of every
// earlier holder of this resource (docs/design.md §5 says when), or 0 when
// Options.Fencing is off. Pass it to the resource with every write, and let
// the resource reject writes carrying a fence lower than one it has seen.
func (lk *Lock) Fence() uint64 { return lk.fence }

// Deadline returns the instant (with a monotonic reading) until which the
// lock is held: start + TTL − drift − SafetyMargin of the latest successful
// acquisition or extension.
func (lk *Lock) Deadline() time.Time {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.deadline
}

// Valid reports whether the lock is held: not unlocked, and its deadline
// still ahead.
func (lk *Lock) Valid() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return !lk.released && lk.locker.env.now().Before(lk.deadline)
}

// Acquisition returns the breakdown of the round that acquired the lock.
func (lk *Lock) Acquisition() Acquisition { return lk.acq.unpack(lk.locker.addrs) }

// Extend resets the TTL on every master that still holds this lock's
// token (for a lock on several resources: every key of the set), never
// shortening a key that has longer to live. It
// succeeds only when a majority did so before the current deadline and,
// as for an acquisition, validity is left: the new deadline, counted from
// the extension's own start, is still ahead. Otherwise it returns an error
// wrapping ErrLost. After the deadline it sends nothing: a lapsed lock is
// never silently re-acquired. A failed extension leaves the current
// deadline in place (it may be retried while time remains), unless it
// asked for a shorter TTL: the deadline then moves to the extension's
// window, as the caller asked for no longer. After the Locker's Close it returns an
// error wrapping ErrClosed: the lock may still be held until its keys
// expire. WithTTL sets the TTL of this extension and of later ones; an
// invalid one fails with ErrInvalid and sends nothing.
func (lk *Lock) Extend(ctx context.Context, opts ...LockOption) (err error) {
	if ctx == nil {
		return nilContext("Extend")
	}
	return lk.extend(ctx, false, opts)
}

// extend is Extend; kept marks the keeper's own extensions, which wait for
// the masters up to keepWait instead of MasterTimeout.
func (lk *Lock) extend(ctx context.Context, kept bool, opts []LockOption) (err error) {
	l := lk.locker
	ctx, span := l.tel.start(ctx, "Extend", lk.resource)
	outcome := outExtFailed
	defer func() {
		l.tel.extension(ctx, outcome, lk.resource)
		end(span, err)
	}()
	if l.isClosing() {
		return closedError("extend", lk.resource) // the keys may still be on the masters
	}
	if lk.isReleased() { // before waiting for an extension in flight
		return extendAfterUnlock(lk)
	}
	lk.extMu.Lock()
	defer lk.extMu.Unlock()
	lk.mu.Lock()
	released, cur, deadline := lk.released, lk.ttl, lk.deadline
	lk.mu.Unlock()
	if released {
		return extendAfterUnlock(lk)
	}
	if !l.enter() {
		return closedError("extend", lk.resource)
	}
	defer l.ops.Done()
	ttl, budget, err := l.ttlBudget(cur, opts)
	if err != nil {
		return err
	}
	start := lk.locker.env.now()
	if !start.Before(deadline) {
		outcome = outLapsed
		return &Error{Op: "extend", Resource: lk.resource, Need: l.need, Reason: "deadline passed", kind: ErrLost}
	}
	kind := cmdExtend
	switch {
	case lk.multi():
		kind = cmdExtendMulti
	case lk.mode == modeRead:
		kind = cmdReadExtend
	case lk.permits > 0:
		kind = cmdSemExtend
	}
	ms := uint64(ttl.Milliseconds())
	wait := l.opts.MasterTimeout
	if kept {
		var stop context.CancelFunc
		wait = l.keepWait(deadline)
		ctx, stop = l.keepContext(ctx, start)
		defer stop()
	}
	res := l.roundFor(ctx, start, false, wait, l.need, func(c *cmd) bool {
		lk.set(c)
		c.kind, c.token, c.n, c.pass = kind, lk.token, ms, uint64(lk.permits)
		return true
	})
	elapsed := lk.locker.env.now().Sub(start)
	l.tel.round(ctx, l, "extend", res)
	// The deadline moves only under extMu, which this extension holds:
	// it is still deadline. Unlock may have run meanwhile.
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.released {
		return extendAfterUnlock(lk)
	}
	if granted(res, budget, elapsed) && lk.locker.env.now().Before(lk.deadline) {
		outcome = outExtended
		lk.ttl, lk.budget = ttl, budget
		lk.setDeadlineLocked(budget.Deadline(start))
		return nil
	}
	if d := budget.Deadline(start); d.Before(lk.deadline) {
		// A shorter TTL: the caller asked for no longer than the
		// extension's window (the masters keep the longer life, §6).
		lk.setDeadlineLocked(d)
	}
	fail := func(reason string, cause error) error {
		return &Error{Op: "extend", Resource: lk.resource, Need: l.need, Masters: l.nodeResults(res), Reason: reason, kind: ErrLost, cause: cause}
	}
	switch {
	case res.Err != nil:
		outcome = outCanceled
		return fail("", context.Cause(ctx))
	case !res.Reached:
		if ref := l.refusalIn(res); ref != nil {
			return fail("", ref) // a refused permission, not a lost lock
		}
		return fail("no majority still holds the token", nil)
	case !lk.locker.env.now().Before(lk.deadline):
		outcome = outLapsed
		return fail("the majority answered after the deadline", nil)
	}
	outcome = outLapsed
	return fail(lateReason(elapsed, budget), nil)
}

// extendAfterUnlock is Extend's error (ErrLost) for a lock unlocked
// before or during it.
func extendAfterUnlock(lk *Lock) error {
	return &Error{Op: "extend", Resource: lk.resource, Need: lk.locker.need, Reason: "already unlocked", kind: ErrLost}
}

// setDeadlineLocked moves the deadline, and a Held's loss timer with it.
// lk.mu is held.
func (lk *Lock) setDeadlineLocked(d time.Time) {
	lk.deadline = d
	if lk.held != nil {
		lk.held.rearmLocked()
	}
}

// Unlock deletes the lock's keys on every master that may hold them, waiting
// at most MasterTimeout for each whatever ctx says, and never deletes another
// owner's key; a master that does not answer gets the release when it
// answers again. Done closes before the first release is sent; a kept lock's
// keeper stops first. It returns an error wrapping ErrLost on evidence that
// the lock was not ours (its deadline had passed, it was declared lost, or
// too many masters hold another token; slow masters are no evidence),
// ErrUnlocked for a second Unlock, ErrClosed after Close (the keys stay until
// their TTL), and ErrInvalid naming a command a master's ACL refused.
func (lk *Lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Unlock")
	}
	lk.mu.Lock()
	h := lk.held
	lk.mu.Unlock()
	if h != nil {
		_, err := h.unlock(ctx)
		return err
	}
	return lk.unlockKeys(ctx)
}

// unlockKeys is Unlock's release of the keys; a lifetime's unlock calls it
// once the keeper has let go of the lock.
func (lk *Lock) unlockKeys(ctx context.Context) (err error) {
	l := lk.locker
	ctx, span := l.tel.start(ctx, "Unlock", lk.resource)
	defer func() { end(span, err) }()
	// The lock is over from here on, whether or not a release can be
	// sent (after Close its keys stay until their TTL): Valid is false,
	// and what is made from it is born ended. mu is not held across the
	// release round: Deadline and Valid do not wait for it, and an
	// extension in flight finds the lock released when it settles.
	lk.mu.Lock()
	if lk.released {
		lk.mu.Unlock()
		return &Error{Op: "unlock", Resource: lk.resource, Need: l.need, kind: ErrUnlocked}
	}
	lk.released = true
	h, deadline, waited, queueID := lk.held, lk.deadline, lk.waited, lk.queueID
	if h != nil {
		h.lapseLocked()  // a loss whose timer runs late, as lifetime.unlock
		h.endForUnlock() // before any release is sent
	}
	lk.mu.Unlock()
	l.live.remove(lk)
	if !l.enter() {
		return closedError("unlock", lk.resource)
	}
	defer l.ops.Done()
	l.tel.unlocked(ctx, lk.resource)
	defer func() { l.tel.unlockedHold(ctx, lk, err) }()
	expired := !lk.locker.env.now().Before(deadline)
	if l.beforeRelease != nil {
		l.beforeRelease(lk.resource)
	}
	res := l.release(ctx, lk.target, lk.token, lk.mayHold, waited, queueID)
	if ref := l.refusalIn(res); ref != nil {
		// Keys stay where the release was refused (until their TTL): say
		// so rather than return nil.
		err = &Error{Op: "unlock", Resource: lk.resource, Need: l.need, Masters: l.nodeResults(res),
			Reason: "the lock's keys stay until their TTL on the masters whose ACL denied the release", kind: ErrInvalid, cause: ref}
		l.log.WarnContext(ctx, "redlock: released with errors", l.logResource(lk.resource), "token", shortToken(lk.token), l.logErr(err, lk.resource))
		return err
	}
	reason := ""
	switch {
	case expired:
		reason = "deadline had passed before unlock"
		l.tel.lostLease(ctx, lk.resource, "expired_before_unlock")
	case res.Count(quorum.Refused) > len(res.Replies)-l.need:
		reason = "another owner's token is on too many masters for this lock to have held a majority"
		l.tel.lostLease(ctx, lk.resource, "taken")
	default:
		if unconfirmed := unconfirmed(res); unconfirmed > 0 {
			l.log.InfoContext(ctx, "redlock: released with errors; masters that did not answer get the release when they answer again", l.logResource(lk.resource), "token", shortToken(lk.token), "unconfirmed", unconfirmed)
		} else {
			if l.log.Enabled(ctx, slog.LevelDebug) { // its attributes cost allocations
				l.log.DebugContext(ctx, "redlock: released", l.logResource(lk.resource), "token", shortToken(lk.token))
			}
		}
		return nil
	}
	err = &Error{Op: "unlock", Resource: lk.resource, Need: l.need, Masters: l.nodeResults(res), Reason: reason, kind: ErrLost}
	if h == nil || !h.firing.Load() { // a kept lock's loss was logged when it happened
		l.log.ErrorContext(ctx, "redlock: lost", l.logResource(lk.resource), "token", shortToken(lk.token), "reason", reason, l.logErr(err, lk.resource))
	}
	return err
}

// refusalIn is refusal(l.nodeResults(res)) without building the nodes:
// a master refused for another owner's key (Refused) carries no error
// there.
func (l *Locker) refusalIn(res quorum.Result) error {
	for i, r := range res.Replies {
		if r.Outcome != quorum.Refused && errors.Is(r.Err, ErrInvalid) {
			return fmt.Errorf("master %s: %w", l.addrs[i], r.Err)
		}
	}
	return nil
}
