package redlock

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/quorumlab/redlock/internal/transport"
	"github.com/quorumlab/redlock/quorum"
)

// env is what a Locker takes from outside its own memory, besides its
// masters: the time, randomness, and the ways it waits. Production runs
// on sysEnv (the monotonic clock, the runtime's random sources, blocking
// waits and goroutines); the deterministic simulator in this package's
// tests runs the same code on simulated time, one seeded source of
// randomness and no goroutine of the Locker's own (docs/design.md §20).
// Every reading of the clock the protocol acts on goes through now.
type env interface {
	// now is the current time.
	now() time.Time
	// await waits for round r to be decided, for timeout from its
	// start, or for ctx to end (quorum.Round.Wait).
	await(ctx context.Context, r *quorum.Round, timeout time.Duration) quorum.Result
	// sleep waits for the first of: delay passing (on t, a timer kept
	// for reuse), a value on woken (nil: none), ctx ending, quit ending.
	sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, t **time.Timer) wakeup
	// afterFunc runs f once d has passed, unless stopped first.
	afterFunc(d time.Duration, f func()) stopper
	// afterDone runs f once ctx has ended, unless stop is called first
	// (context.AfterFunc; stop reports whether it kept f from running).
	afterDone(ctx context.Context, f func()) (stop func() bool)
	// random is 64 random bits (tokens, ids: from a source fit for
	// secrets in production); intN draws uniformly from [0, n), n > 0.
	random() uint64
	intN(n int64) int64
	// detached: the Locker starts no goroutine of its own; what a
	// goroutine of its would do (a stream's flush, a subscriber's
	// reconcile) it hands to later, which runs f once the caller has
	// yielded. Production is not detached and never calls later.
	detached() bool
	later(f func())
	// spawn runs f as a goroutine of the Locker's own (the keeper's
	// loop and workers): production starts one; the simulator runs f as
	// one of the process's coroutines, which may wait as callers do.
	spawn(f func())
}

// wakeup is what ended a sleep.
type wakeup uint8

const (
	wakeTimer  wakeup = iota // the delay passed
	wakeWoken                // woken had a value
	wakeCtx                  // the context ended
	wakeClosed               // quit ended: the Locker is closing
)

// stopper cancels what afterFunc set up (*time.Timer is one).
type stopper interface{ Stop() bool }

// sysEnv is production's env.
type sysEnv struct{}

func (sysEnv) now() time.Time { return time.Now() }

func (sysEnv) await(ctx context.Context, r *quorum.Round, timeout time.Duration) quorum.Result {
	return r.Wait(ctx, timeout)
}

func (sysEnv) sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, t **time.Timer) wakeup {
	if *t == nil {
		*t = time.NewTimer(delay)
	} else {
		(*t).Reset(delay)
	}
	select {
	case <-ctx.Done():
		return wakeCtx
	case <-quit.Done():
		return wakeClosed
	case <-(*t).C:
		return wakeTimer
	case <-woken:
		(*t).Stop()
		return wakeWoken
	}
}

func (sysEnv) afterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

func (sysEnv) afterDone(ctx context.Context, f func()) func() bool {
	return context.AfterFunc(ctx, f)
}

func (sysEnv) random() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails (Go ≥ 1.24)
	return binary.LittleEndian.Uint64(b[:])
}

func (sysEnv) intN(n int64) int64 { return rand.Int64N(n) }

func (sysEnv) detached() bool { return false }

func (sysEnv) later(f func()) { go f() }

func (sysEnv) spawn(f func()) { go f() }

// wireEnv is e as the transport's Env (package internal/transport): the
// same clock and waits, so that the simulator runs the streams on its
// clock too.
type wireEnv struct{ e env }

func (w wireEnv) Now() time.Time { return w.e.now() }

func (w wireEnv) AfterFunc(d time.Duration, f func()) transport.Stopper { return w.e.afterFunc(d, f) }

func (w wireEnv) AfterDone(ctx context.Context, f func()) func() bool { return w.e.afterDone(ctx, f) }

func (w wireEnv) Detached() bool { return w.e.detached() }

func (w wireEnv) Later(f func()) { w.e.later(f) }
