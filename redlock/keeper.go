package redlock

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"time"
)

// The Locker's keeper at work (docs/design.md §8; the keeper type, in
// lockerstate.go, says how it works): adding a kept lock and taking it
// out, the goroutine that sleeps until the earliest extension is due, the
// workers that run the due extensions, one extension of a kept lock and
// its retry.

// keepWorkers bounds how many extensions one Locker's keeper has in
// flight at once. Extensions that fall due together are sent by up to
// this many goroutines, so their commands reach each master's stream
// together and go out pipelined, while the number of goroutines stays
// the same whether the Locker keeps ten leases or a hundred thousand.
const keepWorkers = 64

// keepBatch bounds how many locks one batched extension carries (one
// script call per master), so that no call holds a master for long, and
// a call that times out on a loaded machine fails few locks at once.
const keepBatch = 64

// keepAhead is how much earlier than planned the keeper may extend a lock
// so that it joins a batch with others falling due about then: at most
// this, and at most a quarter of the wait that was planned.
const keepAhead = 10 * time.Millisecond

// add starts keeping h, its first extension due in `in`, unless h's
// context has ended (a loss or an unlock, which leave the keeper after
// they end it, came first).
func (k *keeper) add(h *lifetime, in time.Duration) {
	k.mu.Lock()
	if h.ctx.Err() != nil {
		k.mu.Unlock()
		return
	}
	h.left = false
	k.live++
	k.mu.Unlock()
	k.schedule(h, in)
}

// schedule plans h's next extension in `in`, replacing any plan it had;
// nothing once h has left.
func (k *keeper) schedule(h *lifetime, in time.Duration) {
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.left {
		return
	}
	if k.base.IsZero() {
		k.base = now
	}
	at := now.Sub(k.base) + in
	h.gen++
	heap.Push(&k.due, dueItem{at: at, ahead: min(keepAhead, in/4), h: h, gen: h.gen})
	if !k.running {
		k.running = true
		if k.wakeup == nil {
			k.wakeup = make(chan struct{}, 1)
		}
		k.env.spawn(k.run)
		return
	}
	if k.due[0].h == h && k.due[0].gen == h.gen {
		k.signal()
	}
}

// leave stops keeping h: no extension of it starts from now on, and one
// in flight alone (extendOnce) is ended; a batched one runs on for the
// others, and settles nothing for h once its lock is released.
func (k *keeper) leave(h *lifetime) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.extStop != nil {
		h.extStop()
		h.extStop = nil
	}
	if h.left {
		return
	}
	h.left = true
	k.live--
	if k.live == 0 {
		k.signal()
	}
}

// signal wakes the goroutine. k.mu is held.
func (k *keeper) signal() {
	select {
	case k.wakeup <- struct{}{}:
	default:
	}
}

// run moves the extensions that are due to the workers, starting workers
// as needed, and sleeps until the next falls due. It returns when no Held
// is kept, or once the Locker's Close has begun.
func (k *keeper) run() {
	var t *time.Timer // env.sleep's, kept for reuse
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		k.mu.Lock()
		if k.live == 0 || k.quit.Err() != nil {
			// Nothing is kept, or the Locker is closing: no extension
			// can succeed from now on (Close), and the kept locks end
			// by their own loss timers, which need no goroutine.
			k.running = false
			k.due = nil // only stale items are left, or none that can run
			k.mu.Unlock()
			return
		}
		now := k.env.now().Sub(k.base)
		for len(k.due) > 0 {
			it := k.due[0]
			if it.h.left || it.gen != it.h.gen {
				heap.Pop(&k.due)
				continue
			}
			if it.at-it.ahead > now {
				break
			}
			heap.Pop(&k.due)
			if it.h.lk.batchable() {
				k.batch = append(k.batch, it.h)
			} else {
				k.ready = append(k.ready, it.h)
			}
		}
		k.startWorkersLocked()
		wait := time.Hour
		if len(k.due) > 0 {
			wait = k.due[0].at - now
		}
		k.mu.Unlock()
		k.env.sleep(context.Background(), k.quit, wait, k.wakeup, &t)
	}
}

// startWorkersLocked starts workers for what is pending, one per lock
// extended alone and one per batch of up to keepBatch, up to keepWorkers in
// all. k.mu is held.
func (k *keeper) startWorkersLocked() {
	for k.workers < keepWorkers && k.workers < len(k.ready)-k.head+(len(k.batch)-k.bhead+keepBatch-1)/keepBatch {
		k.workers++
		k.env.spawn(k.work)
	}
}

// single hands hs to the workers, to be extended one by one
// (extendOnce): the locks a batch did not extend.
func (k *keeper) single(hs []*lifetime) {
	if len(hs) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range hs {
		if !h.left {
			k.ready = append(k.ready, h)
		}
	}
	k.startWorkersLocked()
}

// work runs due extensions until none is left: up to keepBatch of the
// batched kind at once, the others one by one.
func (k *keeper) work() {
	for {
		k.mu.Lock()
		if n := min(len(k.batch)-k.bhead, keepBatch); n > 0 {
			hs := slices.Clone(k.batch[k.bhead : k.bhead+n])
			clear(k.batch[k.bhead : k.bhead+n])
			k.bhead += n
			if k.bhead == len(k.batch) {
				k.batch, k.bhead = k.batch[:0], 0
			}
			k.mu.Unlock()
			extendBatch(hs)
			continue
		}
		if k.head == len(k.ready) {
			k.ready, k.head = k.ready[:0], 0
			k.workers--
			k.mu.Unlock()
			return
		}
		h := k.ready[k.head]
		k.ready[k.head] = nil
		k.head++
		k.mu.Unlock()
		h.extendOnce()
	}
}

// extendOnce is one of the keeper's extensions of h. On success the
// Extend itself plans the next (rearmLocked); on a failure that time may
// still mend, it plans a retry; otherwise h leaves the keeper and its
// timer ends the lock at its deadline, if it has not.
func (h *lifetime) extendOnce() {
	h.busy.Lock()
	defer h.busy.Unlock()
	lk := h.lk
	l := lk.locker
	k := &l.keeper
	ctx := h.ctx
	if ctx.Err() != nil {
		k.leave(h)
		return
	}
	// Bounded by the deadline: an extension that ends after it is
	// worthless. It must not inherit a cancellation meant for fn, but
	// ends when h leaves the keeper (an Unlock must not wait for it).
	ectx, ecancel := l.until(context.WithoutCancel(ctx), lk.Deadline())
	defer ecancel()
	k.mu.Lock()
	left := h.left
	if !left {
		h.extStop = ecancel
	}
	k.mu.Unlock()
	if left {
		return
	}
	began := l.env.now()
	err := lk.extend(ectx, true, nil) // on success it re-arms h.lost and plans the next
	k.mu.Lock()
	h.extStop = nil
	k.mu.Unlock()
	l.pace.record(l.env.now().Sub(began))
	if err == nil {
		if h.failed > 0 {
			l.log.InfoContext(ctx, "redlock: extended after a failure", l.logResource(lk.resource), "token", shortToken(lk.token), "failed", h.failed)
		}
		h.failed = 0
		return
	}
	h.failed++
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalid) || lk.isReleased() || !l.env.now().Before(lk.Deadline()) {
		// Nothing more can extend it (closed, refused by the masters'
		// ACL, unlocked, or past its deadline): the timer ends the lock
		// at its deadline, if it has not.
		k.leave(h)
		return
	}
	h.retryLocked(err, lk.Deadline())
}

// retryLocked plans the keeper's next attempt after a failed extension whose
// failure time may still mend, and says so. h.busy is held; deadline is
// the lock's.
func (h *lifetime) retryLocked(err error, deadline time.Time) {
	lk := h.lk
	l := lk.locker
	l.log.WarnContext(h.ctx, "redlock: extension failed; retrying while time remains", l.logResource(lk.resource), "token", shortToken(lk.token), l.logErr(err, lk.resource))
	// Retry soon, but not in a tight loop against a stalled quorum.
	l.keeper.schedule(h, max(l.opts.MasterTimeout, deadline.Sub(l.env.now())/4))
}

// until is ctx, ended with context.DeadlineExceeded at deadline on the
// Locker's clock (env), or by the CancelFunc, which the caller calls.
func (l *Locker) until(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := l.env.afterFunc(deadline.Sub(l.env.now()), func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}

// keepWait is how long one of the keeper's extensions waits for the
// masters to answer (docs/design.md §8): a quarter of the time the lock
// has left, and at least MasterTimeout. An acquisition gives up on a master
// at MasterTimeout so that its caller can retry at once; a kept lock has no
// caller to retry, and a wait cut at MasterTimeout on masters that all
// answer a little slower (a loaded host) fails every extension until the
// lock is lost. The wait ends earlier once a majority has answered, so a
// stalled minority costs nothing more; the validity of an extension still
// counts from its start, and a majority that answers after its deadline
// (or with no validity left) still extends nothing.
func (l *Locker) keepWait(deadline time.Time) time.Duration {
	return max(l.opts.MasterTimeout, deadline.Sub(l.env.now())/4)
}

// keepContext is ctx for a keeper's extension that began at start, ended
// once the Locker closes, though not before MasterTimeout from start (as
// long as any round waits): Close waits for operations in flight, and must
// not wait for keepWait.
func (l *Locker) keepContext(ctx context.Context, start time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := l.env.afterDone(l.quit, func() {
		l.env.afterFunc(start.Add(l.opts.MasterTimeout).Sub(l.env.now()), cancel)
	})
	return ctx, func() { stop(); cancel() }
}
