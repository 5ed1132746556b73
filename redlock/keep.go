package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Do acquires resource (retrying per Options.Retry until ctx ends), runs fn
// with a context that lives as long as the lock, and releases the lock when
// fn returns.
//
// While fn runs, one goroutine extends the lock whenever about a third of
// the TTL remains (with jitter), retrying a failed extension while time
// remains. If the deadline arrives without a successful extension, fn's
// context is cancelled at that instant with cause ErrLost
// (context.Cause(ctx) == ErrLost), and Do returns an error wrapping ErrLost
// and fn's error, if any. fn must stop touching the resource when its
// context is done: the lock is no longer exclusive. Cancelling Do's ctx
// cancels fn's context too. Every goroutine Do starts has ended when Do
// returns. FromContext(ctx) inside fn gives the Lock, e.g. for its Fence.
func (l *Locker) Do(ctx context.Context, resource string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return invalid("Do: fn is nil")
	}
	lk, err := l.Lock(ctx, resource)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, lockKeyCtx{}, lk))
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { lk.keep(fctx, cancel, stop) })

	ferr := fn(fctx)
	close(stop)
	wg.Wait()
	lost := errors.Is(context.Cause(fctx), ErrLost)
	uerr := lk.Unlock(context.WithoutCancel(ctx))
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

// keep extends lk until stop is closed or ctx ends, and cancels ctx with
// ErrLost when the deadline passes without an extension.
func (lk *Lock) keep(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	l := lk.locker
	ttl := l.opts.TTL
	lost := time.NewTimer(time.Until(lk.Deadline()))
	defer lost.Stop()
	next := time.NewTimer(lk.extendIn(ttl))
	defer next.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-lost.C:
			cancel(ErrLost)
			return
		case <-next.C:
			// Extend is bounded by NodeTimeout; it must not inherit a
			// cancellation meant for fn.
			err := lk.Extend(context.WithoutCancel(ctx))
			if err == nil {
				lost.Reset(time.Until(lk.Deadline()))
				next.Reset(lk.extendIn(ttl))
				continue
			}
			l.log.Warn("redlock: extension failed; retrying while time remains", "resource", lk.resource, "err", err)
			// Retry soon, but not in a tight loop against a stalled quorum.
			next.Reset(max(l.opts.NodeTimeout, time.Until(lk.Deadline())/4))
		}
	}
}

// extendIn is how long to wait before extending: until about a third of
// the TTL remains before the deadline, jittered by up to TTL/30 so that
// many holders do not extend in lockstep.
func (lk *Lock) extendIn(ttl time.Duration) time.Duration {
	jitter := time.Duration(rand.Int64N(int64(ttl/30) + 1))
	return max(0, time.Until(lk.Deadline())-ttl/3-jitter)
}
