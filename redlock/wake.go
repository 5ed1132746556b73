package redlock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// Wake on release (docs/design.md §14).
//
// A release deletes the key and PUBLISHes, on a channel named like the key,
// the SHA-1 of the released token. A Lock caller whose round found the key
// held registers as a waiter; the Locker subscribes to the key's channel on
// every master (one subscription connection per master, shared by all its
// waiters) and, when the release of one token has been announced by a
// majority of masters, wakes the longest-waiting of its waiters for that
// key, which retries at once. One wake per release, not one per waiter:
// the others would only find the key taken again. Counting a majority of
// announcements, not the first, means the key is free on enough masters
// for the retry to succeed, and ignores the clean-up of failed rounds
// (released on the few masters they reached). Nothing here is needed for
// safety: a message that is lost, or a subscription that is down, only
// leaves the waiter on its backoff timer.

// With a queue on the masters (queued: one resource, lock keys with a
// hash tag), a waiter also joins the key's queue there, and a release
// names the longest-waiting caller of every Locker: a Locker wakes its
// waiter only when a majority of masters named it, so one release wakes
// one caller across all Lockers. A release that names nobody (an empty
// queue, or a master without the queue) wakes this Locker's first waiter,
// as before.

// This file holds the waiters' registry: who waits for which key, in
// what order, and whom a wake goes to. The release announcements are
// counted in announce.go, the hand-off's grants kept in grant.go, the
// subscriptions that carry the announcements made in subscriptions.go,
// the watch of elections in watch.go, and the wake on expiry in expiry.go.

// lingerFor is how long a key stays subscribed after its last waiter left,
// so that a key contended now and then is not subscribed and unsubscribed
// around every wait.
const lingerFor = time.Second

type waker struct {
	// What it needs of its Locker, given when it is built: the clock,
	// randomness and timers (env.go), the masters by index (a client, nil
	// for a master on the client path, and each as given, which
	// subscribe opens a subscription on), and how many make a majority.
	env     env
	masters []redis.UniversalClient
	given   []driver.Master
	need    int

	mu     sync.Mutex
	queues map[string]*waitQueue // by key: subscribed, or about to be
	// watched: the channels an Election's observers listen on (watch),
	// subscribed beside the keys of queues.
	watched map[string][]*watcher
	subs    []*subscriber // by master; nil until the first wait
	closed  bool
	quit    chan struct{}
	wg      sync.WaitGroup
	ctx     context.Context // subscriptions' calls; cancelled by close
	cancel  context.CancelFunc

	waiting atomic.Int64 // waiters registered: busy's fast answer when 0
	keys    atomic.Int64 // len(queues): contended's fast answer when 0
	id      string       // this Locker's part of its waiters' ids in the queues
	suffix  string       // of the channel on which a release names one of its waiters
	seq     atomic.Uint64
	drop    atomic.Bool  // tests: ignore every announcement
	woken   atomic.Int64 // waiters woken, for tests
}

// waitQueue is the waiters of one key, in arrival order, and the tally of
// release announcements since the last wake.
type waitQueue struct {
	waiters   []*waiter
	tally     map[string]int // digest of a released token → masters that announced it
	idleSince time.Time      // when the last waiter left (zero while there are waiters)
	// handedAt is when a release last named a queued caller (zero once a
	// release named nobody): the masters' queue is not empty, and a new
	// caller joins it rather than race the one being woken.
	handedAt time.Time
	// freedAt is when a master last announced a release that named none
	// of this Locker's waiters.
	freedAt time.Time
}

// waiter is one Lock call waiting for any of its keys to be released.
type waiter struct {
	ch     chan struct{} // one buffered wake
	keys   []string
	queued bool // registered in the queues (not when the Locker was closing)
	// Its entry in the key's queue on the masters: id, and began, when
	// it started waiting: each join sends its age since then, which the
	// master takes from its own clock for the score (join.lua), and a
	// member joined again keeps its score.
	id    string
	began time.Time
	// life: how long, in ms, each master keeps its member past a join
	// (memberLife).
	life uint64
	// The release that last named it (msg), how many masters have, and
	// whether one has since the caller last asked: guarded by the
	// waker's mutex.
	msg         string
	named       int
	by          []bool // by master: named it in msg
	newlyPopped bool   // a release named it (so took it off the queue) since the caller last asked (takePopped)
	again       bool   // wake it again on the majority's announcement
	// grant: a waiter a release may hand the key to (nil otherwise);
	// guarded by the waker's mutex.
	grant *grantState
	// reader: an RLock waiting for a writer to go. It waits on the
	// writer's key, and every release of that key wakes every reader
	// (readers share, so none is first in line), besides the one writer
	// a release wakes; a reader never holds a writer back in line.
	reader bool
}

// newWaker makes the waker of a Locker that lives in e, over its masters
// (clients by index, nil on the client path, and as given), of which need
// make a majority.
func newWaker(e env, masters []redis.UniversalClient, given []driver.Master, need int) *waker {
	w := &waker{env: e, masters: masters, given: given, need: need, queues: map[string]*waitQueue{}, quit: make(chan struct{})}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.random())
	w.id = hex.EncodeToString(b[:])
	w.suffix = ":w:" + w.id
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// wait registers a waiter for t's keys, subscribing to those not yet
// subscribed. It never blocks on a master: subscriptions are made by each
// master's subscriber goroutine.
func (w *waker) wait(t target) *waiter {
	keys := t.keys
	if keys == nil {
		keys = []string{t.key}
	}
	reader := t.mode == modeRead
	if reader {
		// "<stem>:r" waits for "<stem>:w" (rwmutex.go), whose releases
		// are announced.
		keys = []string{t.key[:len(t.key)-1] + "w"}
	}
	wt := &waiter{ch: make(chan struct{}, 1), keys: keys, reader: reader,
		id: w.id + "." + strconv.FormatUint(w.seq.Add(1), 36), began: w.env.now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return wt // never woken: the backoff and ErrClosed end the wait
	}
	changed := false
	for _, k := range keys {
		q := w.queues[k]
		if q == nil {
			q = &waitQueue{}
			w.queues[k] = q
			w.keys.Add(1)
			changed = true
		}
		q.waiters = append(q.waiters, wt)
		q.idleSince = time.Time{}
	}
	wt.queued = true
	w.waiting.Add(1)
	if w.subs == nil {
		w.startLocked()
	}
	if changed {
		w.notifyLocked()
	}
	return wt
}

// busy reports whether this Locker has callers waiting for exactly t's
// keys. Only those go first: a caller for other keys (a set that shares
// one) may be waiting for a key t does not need.
// Every Lock call asks, so the common answer, nobody waits at all, is
// read from an atomic without the waker's mutex.
func (w *waker) busy(t target) bool {
	if w.waiting.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if q := w.queues[t.key]; q != nil {
		for _, x := range q.waiters {
			if x.reader {
				continue
			}
			if (t.keys == nil && len(x.keys) == 1) || slices.Equal(x.keys, t.keys) {
				return true
			}
		}
	}
	return false
}

// contended reports whether a caller of this Locker has waited for key
// within lingerFor (its entry in queues is swept after that): a release of
// key then hands it on to the masters' queue (docs/design.md §14.1 item
// 2). Every release asks, so the common answer, no key waited for at all,
// is read from an atomic without the waker's mutex.
func (w *waker) contended(key string) bool {
	if w.keys.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queues[key] != nil
}

// channel is where a release of key names one of this Locker's waiters
// (release.lua).
func (w *waker) channel(key string) string { return key + w.suffix }

// handed records that this Locker's release of key woke a queued caller,
// so that a Lock of this Locker for key within handingOn's maxAge joins
// the queue behind it. A key none of its callers waited for lately (an
// election's campaigner that never waited, election.go) gets an entry
// without waiters, forgotten after lingerFor as any idle one.
func (w *waker) handed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := w.env.now()
	q := w.queues[key]
	if q == nil {
		q = &waitQueue{idleSince: now}
		w.queues[key] = q
		w.keys.Add(1)
		if w.subs == nil {
			w.startLocked()
		}
		w.notifyLocked()
	}
	q.handedAt = now
}

// freedSince reports whether a master announced, since t0, a release of
// t's key that woke nobody here: a caller whose round (begun at t0) found
// the key held, and that was not yet waiting, may have missed it.
func (w *waker) freedSince(t target, t0 time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[t.key]
	return q != nil && q.freedAt.After(t0)
}

// handingOn reports whether a release of t's key recently woke a queued
// caller (within maxAge): a new caller then joins the queue behind it
// instead of racing it, which would split the masters' votes.
func (w *waker) handingOn(t target, maxAge time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[t.key]
	return q != nil && !q.handedAt.IsZero() && w.env.now().Sub(q.handedAt) < maxAge
}

// first reports whether no waiter for the same keys is ahead of wt in
// line, or wt is in no line at all (the Locker is closing): then it polls
// on its backoff; otherwise it waits to be woken in turn. Waiters for
// other sets of keys do not hold it back.
func (w *waker) first(wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || wt.reader {
		return true
	}
	q := w.queues[wt.keys[0]]
	j := q.place(wt)
	if j < 0 {
		return true
	}
	for _, x := range q.waiters[:j] {
		if !x.reader && slices.Equal(x.keys, wt.keys) {
			return false
		}
	}
	return true
}

// place is wt's place in q (0 first), or −1 when it is not in q.
func (q *waitQueue) place(wt *waiter) int {
	if q == nil {
		return -1
	}
	return slices.Index(q.waiters, wt)
}

// done unregisters wt. A wake it received but did not use goes to the
// next waiter.
func (w *waker) done(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.queued {
		w.waiting.Add(-1)
	}
	unused := len(wt.ch) > 0
	now := w.env.now()
	for _, k := range wt.keys {
		q := w.queues[k]
		j := q.place(wt)
		if j < 0 {
			continue
		}
		q.waiters = slices.Delete(q.waiters, j, j+1)
		if len(q.waiters) == 0 {
			q.idleSince = now
		} else if unused {
			unused = !q.wakeOne()
		}
	}
}

// find is the waiter id of q, or nil.
func (q *waitQueue) find(id string) *waiter {
	for _, x := range q.waiters {
		if x.id == id {
			return x
		}
	}
	return nil
}

// has reports whether the waiter id is in q.
func (q *waitQueue) has(id string) bool {
	return slices.ContainsFunc(q.waiters, func(x *waiter) bool { return x.id == id })
}

// takePopped reports whether a release named wt (and so took it off the
// queue) since the last call, and clears it.
func (w *waker) takePopped(wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := wt.newlyPopped
	wt.newlyPopped = false
	return p
}

// wake gives x a wake unless one is pending.
func (x *waiter) wake() bool {
	if len(x.ch) > 0 {
		return false
	}
	x.ch <- struct{}{}
	return true
}

// wakeReaders wakes every reader waiting on q's key (a writer key) that
// has no wake pending, and returns how many it woke.
func (q *waitQueue) wakeReaders() int64 {
	n := int64(0)
	for _, x := range q.waiters {
		if x.reader && x.wake() {
			n++
		}
	}
	return n
}

// wakeOne wakes the longest-waiting waiter that has no wake pending, not
// a reader (wakeReaders wakes them), and reports whether there was one.
func (q *waitQueue) wakeOne() bool {
	for _, x := range q.waiters {
		if !x.reader && len(x.ch) == 0 {
			x.ch <- struct{}{}
			return true
		}
	}
	return false
}
