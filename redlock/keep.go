package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Held is a lock that extends itself in the background until Unlock, and
// says when it is lost. Hold and Lock.Keep make one. The embedded Lock
// gives its Deadline, Fence, Token and Resources; call Held's Unlock, not
// the Lock's, so that the keeper stops first.
//
// While held, one goroutine extends the lock when about a third of the
// validity window (TTL − drift − SafetyMargin) remains, with jitter, and
// retries a failed extension while time remains. Done is closed, and Err
// returns ErrLost, no later than Deadline(): a timer of its own, re-armed
// only after a successful extension, fires 10ms before the deadline (a
// tenth of the validity window, if less), whatever an extension call is
// doing meanwhile. From then on the lock is not exclusive: stop touching
// the resource. Done is also
// closed by Unlock (Err then returns context.Canceled). After the
// Locker's Close the keeper stops extending, and the lock is lost at its
// deadline.
//
// A Held that is neither unlocked nor lost keeps its goroutine and its
// keys: call Unlock when done.
type Held struct {
	*Lock
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func()
}

// Hold acquires resource like Lock (retrying per Options.Retry until ctx
// ends; WithTTL sets its TTL) and keeps it, like Lock.Keep: ctx bounds the
// acquisition only, and the lock is then held until Unlock or loss.
// Leader election is the typical use (see the example).
func (l *Locker) Hold(ctx context.Context, resource string, opts ...LockOption) (*Held, error) {
	lk, err := l.Lock(ctx, resource, opts...)
	if err != nil {
		return nil, err
	}
	return lk.keepUntil(context.WithoutCancel(ctx)), nil
}

// Keep starts extending lk in the background until Unlock or loss (see
// Held), and returns it as a Held. Calling it again returns the same Held.
func (lk *Lock) Keep() *Held {
	return lk.keepUntil(context.Background())
}

// keepUntil is Keep, with life as the parent of the Held's context: its
// values, and its cancellation (Do's ctx) ending the Held's context too.
func (lk *Lock) keepUntil(life context.Context) *Held {
	lk.keepOnce.Do(func() {
		ctx, cancel := context.WithCancelCause(context.WithValue(life, lockKeyCtx{}, lk))
		h := &Held{Lock: lk, ctx: ctx, cancel: cancel}
		h.stop = lk.keep(ctx, cancel)
		lk.held = h
	})
	return lk.held
}

// Done is closed when the lock is lost (by its deadline), unlocked, or,
// for Do's Held, when Do's ctx ends.
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Err returns nil while the lock is held; once Done is closed, ErrLost if
// the lock was lost, context.Canceled after Unlock, or the cause that
// ended Do's ctx.
func (h *Held) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Context returns a context that is done when Done is closed, with Err as
// its cause, and from which FromContext returns the Lock: hand it to the
// work the lock protects.
func (h *Held) Context() context.Context { return h.ctx }

// Unlock stops the keeper (waiting for its goroutine), then unlocks as
// Lock.Unlock does, and closes Done. It returns an error wrapping ErrLost
// when the lock had been lost before (its keys are deleted all the same
// where they are still ours), and Lock.Unlock's errors otherwise.
func (h *Held) Unlock(ctx context.Context) error {
	h.stop()
	lost := errors.Is(h.Err(), ErrLost)
	err := h.Lock.Unlock(ctx)
	h.cancel(nil)
	if lost && !errors.Is(err, ErrLost) {
		return errors.Join(&Error{Op: "unlock", Resource: h.resource, Need: h.locker.need, Reason: "the lock was lost before unlock", kind: ErrLost}, err)
	}
	return err
}

// Do acquires resource (retrying per Options.Retry until ctx ends), runs fn
// with a context that lives as long as the lock, and releases the lock when
// fn returns. WithTTL sets the lock's TTL.
//
// While fn runs, the lock is kept as a Held is: extended in the
// background, and fn's context is done no later than the lock's
// Deadline(), cancelled with cause ErrLost (context.Cause(ctx) == ErrLost)
// 10ms before it (see Held) if no extension succeeded, whatever an
// extension call is doing meanwhile. Do then returns an error wrapping
// ErrLost and fn's error, if any. fn must stop touching the resource when
// its context is done: the lock is no longer exclusive. Cancelling Do's
// ctx cancels fn's context too.
//
// If fn panics (or calls runtime.Goexit), Do stops the keeper, releases
// the lock, and lets the panic continue. Every goroutine Do starts has
// ended when Do returns or panics. FromContext(ctx) inside fn gives the
// Lock, e.g. for its Fence.
func (l *Locker) Do(ctx context.Context, resource string, fn func(ctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("Do: fn is nil")
	}
	ctx, span := l.tel.start(ctx, "Do", resource)
	defer func() { end(span, err) }()
	lk, err := l.Lock(ctx, resource, opts...)
	if err != nil {
		return err
	}
	h := lk.keepUntil(ctx)
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			h.Unlock(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(h.ctx)
	returned = true
	h.stop()
	lost := errors.Is(h.Err(), ErrLost)
	uerr := h.Unlock(context.WithoutCancel(ctx))
	switch {
	case lost:
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

// lead is how long before Deadline() the keeper declares the lock lost
// (closing Done, cancelling Do's fn), so that a timer that fires late, as
// Go timers do on a loaded machine, still fires before the deadline: 10ms,
// or a tenth of the validity window if that is less. A process paused
// for longer than that is what Options.SafetyMargin is for.
func (lk *Lock) lead() time.Duration {
	return min(10*time.Millisecond, lk.budget.Window()/10)
}

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
	lost := time.AfterFunc(time.Until(lk.Deadline())-lk.lead(), func() {
		now := time.Now()
		lk.lostAt.Store(&now)
		cancel(ErrLost)
		l.tel.lostLease(ctx, lk.resource, "deadline")
	})
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
				lost.Reset(time.Until(lk.Deadline()) - lk.lead())
				next.Reset(lk.extendIn())
				continue
			}
			if errors.Is(err, ErrClosed) || lk.isReleased() {
				// Nothing more to extend: the timer still ends the lock at
				// its deadline.
				return
			}
			l.log.WarnContext(ctx, "redlock: extension failed; retrying while time remains", "resource", lk.resource, "err", err)
			// Retry soon, but not in a tight loop against a stalled quorum.
			next.Reset(max(l.opts.NodeTimeout, time.Until(lk.Deadline())/4))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
			lost.Stop()
		})
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
