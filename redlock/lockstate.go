package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlab/redlock/validity"
)

// What a Lock holds: the Lock, and its lifetime (the watch over its
// deadline, and its place in the keeper). What they do is in lock.go,
// keep.go and keeper.go.

// Lock is a held lock. Its methods are safe for concurrent use. It is
// yours only before Deadline(); after that, treat the resource as someone
// else's whatever the masters say.
type Lock struct {
	locker *Locker
	target
	token   string
	queueID string // the member in the masters' queue of the waiter the masters handed it to ("" otherwise); set under mu once the lock is registered
	fence   uint64
	permits int       // a semaphore's permit: the semaphore's permits (0 for other locks)
	mayHold []bool    // masters where the acquisition's SET may have landed
	acq     acqRecord // for Acquisition

	// extMu serialises extensions (Extend, the keeper's): held for a
	// whole extension, round included, and taken before mu. mu guards
	// the fields below and is never held across a round, so that Unlock,
	// Deadline, Valid and the lifetime's Done, Err and Context never wait
	// for one.
	extMu    sync.Mutex
	mu       sync.Mutex
	ttl      time.Duration
	budget   validity.Budget // for ttl
	deadline time.Time
	released bool
	waited   bool      // acquired by a Lock that waited: its release hands the key on (set under mu: a Shutdown may be releasing the lock then)
	held     *lifetime // set once by Keep, Done, Err or Context, under mu

	hold *holdEntry // for the hold-time metrics (telemetry.go); nil when not metering
}

// lifetime is a Lock's watch over its deadline (Done, Err, Context) and,
// once Keep is called, its place in the Locker's keeper (keeper.go), which
// extends the lock in the background. A lock gets one the first time any
// of those is called; Keep makes it join the keeper.
type lifetime struct {
	lk     *Lock
	ctx    context.Context // its parent is (*heldValues)(h)
	cancel context.CancelCauseFunc
	// life gives the context its values, and for Do its cancellation
	// (cancellable): see heldValues.
	life        context.Context
	cancellable bool
	stopOnce    sync.Once // stop

	// lost declares the lock lost a lead before its deadline (a timer of
	// the Locker's env). It is re-armed, under the Lock's mutex, by every
	// successful Extend (the keeper's or the caller's: WithTTL may move
	// the deadline earlier), and never once it has fired. nil when the
	// lifetime was born over (released, or past its deadline).
	lost   stopper
	firing atomic.Bool               // the loss is declared (declareLost ran past its checks)
	lostAt atomic.Pointer[time.Time] // when it declared the lock lost (tests)
	fireMu sync.Mutex                // held by declareLost while it runs

	// The Locker's keeper (keeper.go): busy is held while it extends
	// this lock; failed counts its extensions failed in a row (under
	// busy); gen, left and extStop are under the keeper's mutex.
	busy    sync.Mutex
	failed  int
	gen     uint64
	left    bool               // not in the keeper: before Keep, and once it left
	extStop context.CancelFunc // ends the keeper's extension in flight (leave calls it)
	joined  bool               // Keep or Do handed it to the keeper (under the Lock's mu)
	unwatch func() bool        // stops the env.afterDone that leaves the keeper (Do only)
	// unlocked: an Unlock has begun (endForUnlock); from then on the
	// timer declares no loss.
	unlocked atomic.Bool
}
