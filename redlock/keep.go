package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Lock's lifetime (declared in lockstate.go): Keep, Done, Err and
// Context, its loss timer, its end at Unlock, and Do.

// Keep extends the lock in the background until Unlock or loss. The
// Locker's keeper (one goroutine for all its kept locks, and up to 64
// workers while extensions are due: keeper.go) extends it when about a
// third of the validity window (TTL − drift − SafetyMargin) remains, with
// jitter, and retries a failed extension while time remains. Done, Err
// and Context then say when it ends (see Done). After the Locker's Close
// the keeper stops extending, and the lock is lost at its deadline. A kept
// lock keeps its place in the keeper and its keys until Unlock: call it
// when done.
//
// Calling Keep again does nothing. Keep of a lock that has ended returns
// an error, and the work the lock was to protect must not start: ErrLost
// if it was lost, ErrUnlocked if Unlock released it, ErrClosed if the
// Locker's Shutdown did (Done is then closed, and Err is
// context.Canceled).
func (lk *Lock) Keep() error {
	return lk.keep(context.Background(), keepJoin).endedError("keep")
}

// endedError is nil while h's lock lasts; once it has ended, the error
// that says how, for op (Keep, Do): ErrLost when it was lost (its
// deadline passed), ErrClosed when the Locker's Shutdown or Close ended
// it, ErrUnlocked when Unlock did.
func (h *lifetime) endedError(op string) error {
	lk := h.lk
	switch {
	case h.ctx.Err() == nil:
		return nil
	case errors.Is(context.Cause(h.ctx), ErrLost):
		return &Error{Op: op, Resource: lk.resource, Need: lk.locker.need, Reason: "the lock was lost (its deadline passed) before " + op, kind: ErrLost}
	case lk.locker.live.isClosed() || lk.locker.isClosing():
		return closedError(op, lk.resource)
	}
	return &Error{Op: op, Resource: lk.resource, Need: lk.locker.need, Reason: "the lock was released before " + op, kind: ErrUnlocked}
}

// ended reports whether the lock has ended, without making the lifetime
// that Done, Err and Context make (whose timer is the runtime's, not the
// simulator's): a kept lock by its context, another by Valid.
func (lk *Lock) ended() bool {
	lk.mu.Lock()
	h := lk.held
	lk.mu.Unlock()
	if h != nil {
		return h.ctx.Err() != nil
	}
	return !lk.Valid()
}

// Done is closed when the lock ends: when it is lost (no extension
// succeeded before its deadline: a timer of its own fires 10ms before
// Deadline(), or a tenth of the validity window if less, whatever an
// extension call is doing meanwhile), when it is unlocked (before the
// first release is sent), or, for the lock Do holds, when Do's ctx ends.
// From then on the lock is not exclusive: stop touching the resource. A
// lock that is not kept (Keep) is lost at its deadline unless Extend
// moves it.
func (lk *Lock) Done() <-chan struct{} { return lk.keep(context.Background(), keepWatch).ctx.Done() }

// Err returns nil while the lock is held; once Done is closed, ErrLost if
// the lock was lost, context.Canceled after Unlock, or the cause that
// ended Do's ctx.
func (lk *Lock) Err() error {
	h := lk.keep(context.Background(), keepWatch)
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Context returns a context that is done when Done is closed, with Err as
// its cause, and from which FromContext returns the Lock: hand it to the
// work the lock protects.
func (lk *Lock) Context() context.Context { return lk.keep(context.Background(), keepWatch).ctx }

// keepMode is what a caller of keep asks of the lock's lifetime.
type keepMode uint8

const (
	keepWatch keepMode = iota // Done, Err, Context: the lifetime only
	keepJoin                  // Keep: and it joins the keeper
	keepDo                    // Do: it joins the keeper, and its context ends when life does
)

// keep returns lk's lifetime, made on first use; with keepJoin or keepDo
// it joins the keeper unless it has ended. life gives the context its values
// and, with keepDo (life is Do's ctx), its cancellation too: the context
// then ends when life does. Only Do passes a life, and only before
// anything else can have made the lifetime.
func (lk *Lock) keep(life context.Context, mode keepMode) *lifetime {
	join := mode != keepWatch
	// The timer is armed and the lifetime published under the Lock's
	// mutex, so that no Extend can move the deadline in between.
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if h := lk.held; h != nil {
		h.lapseLocked()
		if join && !h.joined && h.lost != nil && h.ctx.Err() == nil {
			lk.joinLocked(h)
		}
		return h
	}
	h := &lifetime{lk: lk, life: life, cancellable: mode == keepDo, left: true}
	h.ctx, h.cancel = context.WithCancelCause((*heldValues)(h))
	lk.held = h
	if lk.released || lk.locker.live.isClosed() {
		// Released already (Unlock, or Shutdown, which closes the live
		// set before it releases anything): its keys may be gone, so no
		// context derived from it may be live. It is born unlocked, and
		// never joins the keeper.
		h.unlocked.Store(true)
		h.left = true
		h.cancel(nil)
		return h
	}
	d := lk.deadline.Sub(lk.locker.env.now()) - lk.leadLocked()
	if d <= 0 {
		// Past the instant its timer would have declared it lost: it
		// is born lost, before anything can be made from it.
		h.declareLost()
		return h
	}
	h.lost = lk.locker.env.afterFunc(d, h.declareLost)
	if join {
		lk.joinLocked(h)
	}
	return h
}

// joinLocked hands h to the keeper. lk.mu is held.
func (lk *Lock) joinLocked(h *lifetime) {
	h.joined = true
	if lk.hold != nil {
		lk.hold.kept.Store(true) // redlock.kept on its hold time
	}
	lk.keepLocked(h)
}

// lapseLocked declares h's lock lost now if its timer should have
// fired already (a timer may run late on a loaded machine): whoever asks
// after that instant finds the lock over. lk.mu is held.
func (h *lifetime) lapseLocked() {
	if h.lost == nil || h.ctx.Err() != nil || h.lk.deadline.Sub(h.lk.locker.env.now()) > h.lk.leadLocked() {
		return
	}
	h.lost.Stop()
	h.declareLost()
}

// heldValues is the parent of a lifetime's context, in place of a
// context.WithValue on life (one allocation fewer per kept lease): it
// answers FromContext's key with the Lock and every other key as life
// does. For a cancellable life (Do's ctx) it is done when life is, so
// that the lifetime's context is cancelled with it, with its cause, as a
// child of a context.WithValue would be. Otherwise it is never done (as
// context.WithoutCancel would be): it is only ever the parent of the
// lifetime's own cancel context, which answers the context package's own
// lookups itself, so life's cancellation cannot reach the lifetime's context.
type heldValues lifetime

func (v *heldValues) Deadline() (time.Time, bool) {
	if v.cancellable {
		return v.life.Deadline()
	}
	return time.Time{}, false
}

func (v *heldValues) Done() <-chan struct{} {
	if v.cancellable {
		return v.life.Done()
	}
	return nil
}

func (v *heldValues) Err() error {
	if v.cancellable {
		return v.life.Err()
	}
	return nil
}

func (v *heldValues) Value(key any) any {
	if key == (lockKeyCtx{}) {
		return v.lk
	}
	return v.life.Value(key)
}

func (v *heldValues) String() string { return "redlock.keeping" }

// declareLost is the lost timer's function; keep and lapseLocked call it
// too, for a lock found past that instant. It acts once.
func (h *lifetime) declareLost() {
	h.fireMu.Lock()
	defer h.fireMu.Unlock()
	if h.unlocked.Load() {
		return // unlocked first: not a loss
	}
	if h.firing.Swap(true) {
		return // declared already
	}
	now := h.lk.locker.env.now()
	h.lostAt.Store(&now)
	h.cancel(ErrLost)
	h.lk.locker.keeper.leave(h)
	h.lk.locker.tel.lostLease(h.ctx, h.lk.resource, "deadline")
	h.lk.locker.tel.holdEnded(h.ctx, h.lk, ErrLost)
	h.lk.locker.log.ErrorContext(h.ctx, "redlock: lost: no extension succeeded before the deadline; stop touching the resource", h.lk.locker.logResource(h.lk.resource), "token", shortToken(h.lk.token), "reason", "deadline")
}

// rearmLocked moves the lost timer to the lock's new deadline after a
// successful extension, unless it has fired, and tells the keeper. lk.mu
// is held.
func (h *lifetime) rearmLocked() {
	if h.lost == nil || h.unlocked.Load() {
		return // born ended (keep), or unlocked: nothing to extend
	}
	if h.lost.Stop() {
		if d := h.lk.deadline.Sub(h.lk.locker.env.now()) - h.lk.leadLocked(); d > 0 {
			h.lost = h.lk.locker.env.afterFunc(d, h.declareLost)
		} else {
			h.declareLost() // an extension with less validity left than the lead
			return
		}
	}
	h.lk.locker.keeper.schedule(h, h.lk.extendInLocked())
}

// unlock is Unlock of a lock with a lifetime: it closes Done (Err:
// context.Canceled, unless the lock was lost first), stops the keeper
// (ending an extension in flight, without waiting for its round: what it
// decides no longer counts once the lock is released), then releases the
// keys; lost reports that the lock had been declared lost before it.
func (h *lifetime) unlock(ctx context.Context) (lost bool, err error) {
	// A loss whose timer runs late (the process was paused, say) is
	// declared here, as Done, Err, Context and Keep declare it: the
	// context's cause and Unlock's error then agree (docs/design.md §8).
	h.lk.mu.Lock()
	h.lapseLocked()
	h.lk.mu.Unlock()
	h.endForUnlock()
	h.stop()
	lost = errors.Is(context.Cause(h.ctx), ErrLost)
	err = h.lk.unlockKeys(ctx)
	if lost && !errors.Is(err, ErrLost) && !errors.Is(err, ErrUnlocked) {
		err = errors.Join(&Error{Op: "unlock", Resource: h.lk.resource, Need: h.lk.locker.need, Reason: "the lock was lost before unlock", kind: ErrLost}, err)
	}
	return lost, err
}

// endForUnlock closes Done at the start of an unlock, before anything is
// sent: the work the lock protects must stop before any master lets
// another owner in. The cause is the first one given, so a loss declared
// earlier stays ErrLost.
func (h *lifetime) endForUnlock() {
	h.unlocked.Store(true)
	h.cancel(nil)
	h.lk.locker.keeper.leave(h)
}

// Do acquires resource (retrying per Options.Retry until ctx ends), runs fn
// with a context that lives as long as the lock, and releases the lock when
// fn returns. WithTTL sets the lock's TTL.
//
// While fn runs, the lock is kept as Lock.Keep keeps it: extended in the
// background, and fn's context is done no later than the lock's
// Deadline(), cancelled with cause ErrLost (context.Cause(ctx) == ErrLost)
// 10ms before it (see Lock.Keep) if no extension succeeded, whatever an
// extension call is doing meanwhile. Do then returns an error wrapping
// ErrLost and fn's error, if any. fn must stop touching the resource when
// its context is done: the lock is no longer exclusive. Cancelling Do's
// ctx cancels fn's context too.
//
// If fn panics (or calls runtime.Goexit), Do stops the keeper, releases
// the lock, and lets the panic continue. When Do returns or panics, no
// extension of its lock starts or settles any more. A lock whose deadline
// passed before fn could start fails Do with ErrLost; fn never runs on it.
// FromContext(ctx) inside fn gives the Lock, e.g. for its Fence.
func (l *Locker) Do(ctx context.Context, resource string, fn func(ctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("Do: fn is nil")
	}
	if ctx == nil {
		return nilContext("Do")
	}
	ctx, span := l.tel.start(ctx, "Do", resource)
	defer func() { end(span, err) }()
	lk, err := l.Lock(ctx, resource, opts...)
	if err != nil {
		return err
	}
	if l.afterLock != nil {
		l.afterLock()
	}
	h := lk.keep(ctx, keepDo)
	if err := h.endedError("do"); err != nil {
		// Shutdown released the lock between Lock and keep, or its
		// deadline passed meanwhile: fn must not run, its keys may be
		// someone else's already.
		h.unlock(context.WithoutCancel(ctx))
		return err
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			h.unlock(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(h.ctx)
	returned = true
	lost, uerr := h.unlock(context.WithoutCancel(ctx))
	if errors.Is(uerr, ErrUnlocked) && !lost {
		uerr = nil // fn unlocked its own lock
	}
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

// FromContext returns the Lock whose Context ctx is or derives from (the
// context Do passes to fn, or a Lock's Context), and whether there is one:
// for its Fence, Deadline, Token.
func FromContext(ctx context.Context) (*Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	lk, ok := ctx.Value(lockKeyCtx{}).(*Lock)
	return lk, ok
}

// leadLocked is how long before Deadline() the keeper declares the lock
// lost (closing Done, cancelling Do's fn), so that a timer that fires
// late, as Go timers do on a loaded machine, still fires before the
// deadline: 10ms, or a tenth of the validity window if that is less. A
// process paused for longer than that is what Options.SafetyMargin is
// for. lk.mu is held.
func (lk *Lock) leadLocked() time.Duration {
	return min(10*time.Millisecond, lk.budget.Window()/10)
}

// keepLocked hands h's lock to the Locker's keeper (keeper.go), which
// extends it until h.stop is called or h's context ends. lk.mu is held.
//
// The deadline has a timer of its own (h.lost), independent of the
// keeper: an extension call in flight, or a keeper behind with its
// batch, must not delay the cancellation.
func (lk *Lock) keepLocked(h *lifetime) {
	k := &lk.locker.keeper
	lk.locker.pace.record(lk.acq.Elapsed) // the acquisition's round, as a first sample
	k.add(h, lk.extendInLocked())
	// The lifetime's context ends by a loss or an unlock, which leave the
	// keeper themselves, or, for Do, when Do's ctx ends: only then is a
	// context.AfterFunc needed to leave (a goroutine only once it runs;
	// about 500 bytes a lifetime, its registration and Done channel, which
	// Hold and Keep do without). The simulator runs it on the process's
	// turn (env.afterDone).
	if h.cancellable {
		h.unwatch = lk.locker.env.afterDone(h.ctx, func() { k.leave(h) })
	}
}

// stop takes h out of the keeper, ending an extension of it in flight
// (leave), and waits for the lost timer's function if it had started. It
// does not wait for the keeper's round: an extension that ends after it
// changes nothing (the lock is released, or unlocked, first: extend and
// settleBatch check). Calls after the first wait for the first to end.
func (h *lifetime) stop() {
	h.stopOnce.Do(func() {
		k := &h.lk.locker.keeper
		if h.unwatch != nil {
			h.unwatch()
		}
		k.leave(h)
		h.lk.mu.Lock()
		lost := h.lost
		h.lk.mu.Unlock()
		if lost != nil && !lost.Stop() {
			// The timer fired: its function has returned, or has yet
			// to take fireMu (it then finds h unlocked and does
			// nothing).
			h.fireMu.Lock()
			h.fireMu.Unlock()
		}
	})
}

// extendInLocked is how long to wait before extending: until about a third of
// the validity window remains before the deadline, or three times the
// Locker's recent p99 round time if that is more (pace.go: slow masters
// make it extend earlier), jittered by up to a thirtieth of the window so
// that many holders do not extend in lockstep, and never sooner than a
// tenth of the window (or half the time left, when less than a fifth of
// the window is left); and never at or past the instant the loss timer
// declares the lock lost (leadLocked before the deadline), but halfway
// there: a lock acquired with little of its window left, as a handed one
// may be, is extended before it is declared lost. lk.mu is held. Pacing
// from the window rather than the TTL matters when SafetyMargin takes
// most of the TTL: a third of the TTL could then exceed the whole window
// and extensions would run back to back.
func (lk *Lock) extendInLocked() time.Duration {
	w, deadline := lk.budget.Window(), lk.deadline
	jitter := time.Duration(lk.locker.env.intN(int64(w/30) + 1))
	left := deadline.Sub(lk.locker.env.now())
	in := max(min(w/10, left/2), left-lk.locker.pace.lead(w)-jitter)
	if loss := left - lk.leadLocked(); in >= loss {
		in = max(loss/2, 0)
	}
	return in
}
