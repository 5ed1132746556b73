package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Do acquires resource (retrying per Options.Retry until ctx ends), runs fn
// with a context that lives as long as the lock, and releases the lock when
// fn returns.
//
// While fn runs, one goroutine extends the lock when about a third of the
// validity window (TTL − drift − SafetyMargin) remains, with jitter, and
// retries a failed extension while time remains. fn's context is done no
// later than the lock's Deadline(): a timer of its own, re-armed only after
// a successful extension, cancels it with cause ErrLost
// (context.Cause(ctx) == ErrLost) a millisecond before the deadline,
// whatever an extension call is doing meanwhile. Do then returns an error
// wrapping ErrLost and fn's error, if any. fn must stop touching the
// resource when its context is done: the lock is no longer exclusive.
// Cancelling Do's ctx cancels fn's context too.
//
// If fn panics (or calls runtime.Goexit), Do stops the keeper, releases
// the lock, and lets the panic continue. Every goroutine Do starts has
// ended when Do returns or panics. FromContext(ctx) inside fn gives the
// Lock, e.g. for its Fence.
func (l *Locker) Do(ctx context.Context, resource string, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return invalid("Do: fn is nil")
	}
	ctx, span := l.tel.start(ctx, "Do", resource)
	defer func() { end(span, err) }()
	lk, err := l.Lock(ctx, resource)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, lockKeyCtx{}, lk))
	defer cancel(nil)
	stop := lk.keep(fctx, cancel)
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			stop()
			lk.Unlock(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(fctx)
	returned = true
	stop()
	lost := errors.Is(context.Cause(fctx), ErrLost)
	uerr := lk.Unlock(context.WithoutCancel(ctx))
	switch {
	case lost:
		l.tel.lostLease(ctx, resource, "deadline")
		return errors.Join(fmt.Errorf("redlock: %q: %w while fn ran", resource, ErrLost), ferr)
	case uerr != nil && ferr != nil:
		return errors.Join(ferr, uerr)
	case uerr != nil:
		return uerr
	}
	return ferr
}

type lockKeyCtx struct{}

// FromContext returns the Lock that Do holds for the context it passed to
// fn (for its Fence, Deadline, Token), and whether there is one.
func FromContext(ctx context.Context) (*Lock, bool) {
	lk, ok := ctx.Value(lockKeyCtx{}).(*Lock)
	return lk, ok
}

// cancelLead is how long before Deadline() Do cancels fn's context, so
// that a timer firing a little late does not carry fn past the deadline.
const cancelLead = time.Millisecond

// keep extends lk until the returned stop is called or ctx ends, and
// cancels ctx with ErrLost when the deadline comes without an extension.
// stop joins the goroutine it started.
//
// The deadline has a timer of its own, independent of the goroutine that
// extends: an extension call in flight must not delay the cancellation.
// The timer is re-armed only after a successful extension, and never once
// it has fired.
func (lk *Lock) keep(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	l := lk.locker
	lost := time.AfterFunc(time.Until(lk.Deadline())-cancelLead, func() { cancel(ErrLost) })
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		next := time.NewTimer(lk.extendIn())
		defer next.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-next.C:
			}
			// Bounded by the deadline: an extension that ends after it is
			// worthless. It must not inherit a cancellation meant for fn.
			ectx, ecancel := context.WithDeadline(context.WithoutCancel(ctx), lk.Deadline())
			err := lk.Extend(ectx)
			ecancel()
			if err == nil {
				if !lost.Stop() {
					return // fired already: fn's context is done
				}
				lost.Reset(time.Until(lk.Deadline()) - cancelLead)
				next.Reset(lk.extendIn())
				continue
			}
			l.log.WarnContext(ctx, "redlock: extension failed; retrying while time remains", "resource", lk.resource, "err", err)
			// Retry soon, but not in a tight loop against a stalled quorum.
			next.Reset(max(l.opts.NodeTimeout, time.Until(lk.Deadline())/4))
		}
	}()
	return func() {
		select {
		case <-quit:
		default:
			close(quit)
		}
		<-done
		lost.Stop()
	}
}

// extendIn is how long to wait before extending: until about a third of
// the validity window remains before the deadline, jittered by up to a
// thirtieth of it so that many holders do not extend in lockstep, and
// never sooner than a tenth of the window (or half the time left, when
// less than a fifth of the window is left). Pacing from the window rather
// than the TTL matters when SafetyMargin takes most of the TTL: a third of
// the TTL could then exceed the whole window and extensions would run back
// to back.
func (lk *Lock) extendIn() time.Duration {
	w := lk.locker.budget.Window()
	jitter := time.Duration(rand.Int64N(int64(w/30) + 1))
	left := time.Until(lk.Deadline())
	return max(min(w/10, left/2), left-w/3-jitter)
}
