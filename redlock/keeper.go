package redlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// keepWorkers bounds how many extensions one Locker's keeper has in
// flight at once. Extensions that fall due together are sent by up to
// this many goroutines, so their commands reach each master's stream
// together and go out pipelined, while the number of goroutines stays
// the same whether the Locker keeps ten leases or a hundred thousand.
const keepWorkers = 64

// keeper extends every Held of one Locker (docs/design.md §8, "Keeping
// many leases"): a min-heap of the times each Held's next extension falls
// due, one goroutine that sleeps until the earliest, and up to keepWorkers
// goroutines that run the extensions that are due. The goroutine runs
// only while some Held is kept, and the workers only while an extension
// is due: a Locker that keeps nothing has none.
//
// Each Held's loss is declared by its own timer (Held.lost), not by the
// keeper: a slow or stalled keeper delays extensions, never the loss
// signal.
type keeper struct {
	mu      sync.Mutex
	due     dueHeap
	live    int           // Helds kept (added and not left)
	running bool          // the goroutine runs
	wakeup  chan struct{} // the earliest due time moved earlier, or live fell to 0
	ready   []*Held       // due, not yet taken by a worker; ready[head:] is pending
	head    int
	workers int // worker goroutines running
}

// dueItem is one planned extension; it is stale once its Held has left or
// has been planned again (gen moved on).
type dueItem struct {
	at  time.Time
	h   *Held
	gen uint64
}

type dueHeap []dueItem

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].at.Before(d[j].at) }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(dueItem)) }
func (d *dueHeap) Pop() any {
	old := *d
	it := old[len(old)-1]
	old[len(old)-1] = dueItem{}
	*d = old[:len(old)-1]
	return it
}

// add starts keeping h, its first extension due in `in`.
func (k *keeper) add(h *Held, in time.Duration) {
	k.mu.Lock()
	k.live++
	k.mu.Unlock()
	k.schedule(h, in)
}

// schedule plans h's next extension in `in`, replacing any plan it had;
// nothing once h has left.
func (k *keeper) schedule(h *Held, in time.Duration) {
	at := time.Now().Add(in)
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.left {
		return
	}
	h.gen++
	heap.Push(&k.due, dueItem{at: at, h: h, gen: h.gen})
	if !k.running {
		k.running = true
		if k.wakeup == nil {
			k.wakeup = make(chan struct{}, 1)
		}
		go k.run()
		return
	}
	if k.due[0].h == h && k.due[0].gen == h.gen {
		k.signal()
	}
}

// leave stops keeping h: no extension of it starts from now on (one in
// flight may still end; Held.stop waits for it).
func (k *keeper) leave(h *Held) {
	k.mu.Lock()
	defer k.mu.Unlock()
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
// is kept.
func (k *keeper) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		k.mu.Lock()
		if k.live == 0 {
			k.running = false
			k.due = nil // only stale items are left
			k.mu.Unlock()
			return
		}
		now := time.Now()
		for len(k.due) > 0 {
			it := k.due[0]
			if it.h.left || it.gen != it.h.gen {
				heap.Pop(&k.due)
				continue
			}
			if it.at.After(now) {
				break
			}
			heap.Pop(&k.due)
			k.ready = append(k.ready, it.h)
		}
		for k.workers < keepWorkers && k.workers < len(k.ready)-k.head {
			k.workers++
			go k.work()
		}
		wait := time.Hour
		if len(k.due) > 0 {
			wait = k.due[0].at.Sub(now)
		}
		k.mu.Unlock()
		t.Reset(wait)
		select {
		case <-t.C:
		case <-k.wakeup:
		}
	}
}

// work runs due extensions until none is left.
func (k *keeper) work() {
	for {
		k.mu.Lock()
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
func (h *Held) extendOnce() {
	h.busy.Lock()
	defer h.busy.Unlock()
	lk := h.lk
	l := lk.locker
	k := &l.keeper
	k.mu.Lock()
	left := h.left
	k.mu.Unlock()
	if left {
		return
	}
	ctx := h.ctx
	if ctx.Err() != nil {
		k.leave(h)
		return
	}
	// Bounded by the deadline: an extension that ends after it is
	// worthless. It must not inherit a cancellation meant for fn.
	ectx, ecancel := context.WithDeadline(context.WithoutCancel(ctx), lk.Deadline())
	began := time.Now()
	err := lk.Extend(ectx) // on success it re-arms h.lost and plans the next
	ecancel()
	l.pace.record(time.Since(began))
	if err == nil {
		if h.failed > 0 {
			l.log.InfoContext(ctx, "redlock: extended after a failure", l.logResource(lk.resource), "token", shortToken(lk.token), "failed", h.failed)
		}
		h.failed = 0
		return
	}
	h.failed++
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalid) || lk.isReleased() || !time.Now().Before(lk.Deadline()) {
		// Nothing more can extend it (closed, refused by the masters'
		// ACL, unlocked, or past its deadline): the timer ends the lock
		// at its deadline, if it has not.
		k.leave(h)
		return
	}
	l.log.WarnContext(ctx, "redlock: extension failed; retrying while time remains", l.logResource(lk.resource), "token", shortToken(lk.token), l.logErr(err, lk.resource))
	// Retry soon, but not in a tight loop against a stalled quorum.
	k.schedule(h, max(l.opts.NodeTimeout, time.Until(lk.Deadline())/4))
}
