package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The masters' queue of waiters (docs/design.md §14.1), in a memWorld:
// who is handed the key, in which order, who is woken, and what is left
// on the masters. queue_test.go keeps the checks on real masters of what
// the servers execute and of their clocks.

// memMinuteRetry is a backoff of a minute, and memLongTTL a holder's TTL
// past it: a waiter acquires only when a release hands it the key or
// wakes it, unless the test fires its timer.
var (
	memMinuteRetry = RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}
	memLongTTL     = 2 * time.Minute
)

func isRank(args []string) bool { return len(args) > 0 && args[0] == "ZRANK" }

// lockThenUnlockIn runs l.Lock(ctx, resource) then Unlock in a goroutine;
// the channel gets the first error, or nil.
func lockThenUnlockIn(ctx context.Context, l *Locker, resource string) <-chan error {
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, resource)
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	return got
}

// doneOf is the error got brings, within 10s.
func doneOf(t *testing.T, got <-chan error, who string) error {
	t.Helper()
	select {
	case err := <-got:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", who)
	}
	return nil
}

// wakes is how many waiters the Lockers ls have woken.
func wakes(ls []*Locker) (sum int64) {
	for _, l := range ls {
		sum += Wakes(l)
	}
	return sum
}

// memHolders are the two ways a lock is held that its release tells apart
// (§14.1 item 2): a holder that waited hands the key on by name; one that
// did not only announces the release.
var memHolders = []struct {
	name   string
	waited bool
}{{"holder that waited", true}, {"holder that never waited", false}}

// holdingIn is a lock on resource taken by l: with waited, by a Lock that
// waited (memWorld.waitedLock); without, by a TryLock on a free key.
func (w *memWorld) holdingIn(l *Locker, resource string, waited bool) *Lock {
	w.t.Helper()
	if waited {
		return w.waitedLock(l, resource)
	}
	lk, err := l.TryLock(w.t.Context(), resource)
	if err != nil {
		w.t.Fatal(err)
	}
	return lk
}

// Several Lockers (processes) wait for one key: each release hands the key
// to one waiter across all of them, the longest waiting, whose Lock makes
// no round of its own: no waiter sends a SET (the release's hand-off is
// the only one, docs/design.md §14.3); in turn every waiter gets the lock,
// in the order they started waiting, and the queue is gone afterwards. A
// holder that never waited does not pass the queue: its release wakes one
// waiter of every Locker, each asks its place, and only the head makes a
// round (one SET on each master); the releases after it hand the key on.
func TestReleaseHandsOnToOneWaiterAcrossLockers(t *testing.T) {
	for _, h := range memHolders {
		t.Run(h.name, func(t *testing.T) { testHandsOnAcrossLockers(t, h.waited) })
	}
}

func testHandsOnAcrossLockers(t *testing.T, waited bool) {
	w := newMemWorld(t, 5)
	holder, _ := w.locker(&Options{TTL: memLongTTL})
	const n = 4
	waiters := make([]*Locker, n)
	conns := make([][]*memConn, n)
	for i := range waiters {
		waiters[i], conns[i] = w.locker(&Options{TTL: memLongTTL, Retry: memMinuteRetry})
	}
	const key = "redlock:{herd}"
	lk := w.holdingIn(holder, "herd", waited)
	wctx, cancel := context.WithCancel(t.Context())
	locks := make([]chan *Lock, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, l := range waiters {
		locks[i] = make(chan *Lock, 1)
		wg.Go(func() {
			if lk, err := l.Lock(wctx, "herd"); err == nil {
				locks[i] <- lk
			}
		})
		w.sleeping(i + 1)
		if !w.queued(key, i+1) {
			t.Fatalf("waiter %d: want %d waiters queued on every master:%s", i, i+1, w.state(key))
		}
		w.subscribed(l, key)
		w.advance(time.Millisecond) // the next begins later: a known order
	}
	sets := func() []int {
		sum := make([]int, 5)
		for _, c := range conns {
			for m, k := range sentBy(c, isSet) {
				sum[m] += k
			}
		}
		return sum
	}
	for i := range n {
		before := sets()
		if !waited && i == 0 {
			// The release names nobody: its announcements reach the
			// waiters behind the head first, each asks its place and
			// sleeps again; then the head, which makes its round.
			ranks := make([]int, n)
			for j := 1; j < n; j++ {
				ranks[j] = conns[j][0].count(isRank)
			}
			w.hold()
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			w.flush()
			for j := 1; j < n; j++ {
				w.deliverTo(conns[j])
				eventually(t, "the woken waiter's rank", func() bool { return conns[j][0].count(isRank) > ranks[j] })
			}
			w.sleeping(n)
			w.deliver()
		} else {
			w.releases(lk)
		}
		select {
		case lk = <-locks[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("release %d: waiter %d (the longest waiting) did not acquire: wakes %d:%s", i, i, wakes(waiters), w.state(key))
		}
		want := int64(i + 1)
		if !waited {
			want = n + int64(i) // the first release woke every Locker's waiter
		}
		eventually(t, "the wakes counted", func() bool { return wakes(waiters) >= want })
		w.sleeping(n - i - 1) // the others back asleep
		if got := wakes(waiters); got != want {
			t.Errorf("after %d releases %d waiters woken across the Lockers, want %d", i+1, got, want)
		}
		for m, a := range sets() {
			// The release that handed the key on SETs it to the next
			// holder's token: that waiter made no round, nor did any
			// other. After a holder that never waited, the first release
			// names nobody, and the head makes its round.
			wantSets := 0
			if !waited && i == 0 {
				wantSets = 1
			}
			if d := a - before[m]; d != wantSets {
				t.Errorf("release %d: the waiters sent master %d %d SETs before the next acquisition, want %d", i, m, d, wantSets)
			}
		}
		for j := i + 1; j < n; j++ {
			if len(locks[j]) != 0 {
				t.Fatalf("release %d: waiter %d acquired out of turn", i, j)
			}
		}
		for m, v := range w.get(key) {
			if v != lk.Token() {
				t.Errorf("release %d: master %d holds %q, want the new holder's token", i, m, v)
			}
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.flush()
	if !w.queued(key, 0) {
		t.Errorf("after the last release, want no queue:%s", w.state(key))
	}
}

// A waiter that died in the queue (its Locker gone without leaving) is
// named by the next release and taken off the queue; the waiter behind it
// is not woken then, but acquires on its backoff, and is named by the
// release after. When the holder never waited, its release names nobody:
// the waiter is woken, finds itself behind the dead one, and acquires on
// its polls, seeing the queue ahead of it not move; its own release then
// takes the dead waiter off.
func TestDeadWaiterInQueueIsDropped(t *testing.T) {
	for _, h := range memHolders {
		t.Run(h.name, func(t *testing.T) {
			w := newMemWorld(t, 5)
			holder, _ := w.locker(nil)
			waiter, _ := w.locker(&Options{Retry: RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}})
			const key = "redlock:{dead-waiter}"
			lk := w.holdingIn(holder, "dead-waiter", h.waited)
			for i := range w.masters {
				// Score 1: it has waited longer than anyone.
				w.run(i, "ZADD", key+queueSuffix, "1", "0123456789abcdef.1")
			}
			got := lockThenUnlockIn(t.Context(), waiter, "dead-waiter")
			w.sleeping(1)
			if !w.queued(key, 2) {
				t.Fatalf("want the dead waiter and the waiter queued:%s", w.state(key))
			}
			w.subscribed(waiter, key)
			w.releases(lk)
			want := int64(0) // the release named the dead waiter, not this one
			if !h.waited {
				want = 1 // the release named nobody
				eventually(t, "the waiter woken", func() bool { return Wakes(waiter) == 1 })
			}
			w.until("the waiter's acquisition", one, 100, func() bool { return len(got) > 0 })
			if err := doneOf(t, got, "the waiter"); err != nil {
				t.Fatal(err)
			}
			if n := Wakes(waiter); n != want {
				t.Errorf("%d wakes, want %d", n, want)
			}
			w.flush()
			if !w.queued(key, 0) {
				t.Errorf("want no queue left:%s", w.state(key))
			}
		})
	}
}

// Every Locker's announcements are lost: the waiters of several Lockers
// still all acquire, on their backoff.
func TestQueuedWaitersAcquireWhenEveryMessageIsLost(t *testing.T) {
	w := newMemWorld(t, 5)
	holder, _ := w.locker(nil)
	const key = "redlock:{all-lost}"
	lk, err := holder.TryLock(t.Context(), "all-lost")
	if err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	var gots []<-chan error
	var ls []*Locker
	for i := range 3 {
		l, _ := w.locker(&Options{Retry: RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
		DropWakes(l)
		ls = append(ls, l)
		live.Add(1)
		got := make(chan error, 1)
		go func() {
			defer live.Add(-1)
			got <- <-lockThenUnlockIn(t.Context(), l, "all-lost")
		}()
		gots = append(gots, got)
		w.sleeping(i + 1)
		w.advance(time.Millisecond)
	}
	if !w.queued(key, 3) {
		t.Fatalf("want 3 waiters queued on every master:%s", w.state(key))
	}
	w.releases(lk)
	w.until("every waiter's acquisition", func() int { return int(live.Load()) }, 1000, func() bool { return live.Load() == 0 })
	for i, got := range gots {
		if err := doneOf(t, got, "a waiter"); err != nil {
			t.Errorf("waiter %d: %v", i, err)
		}
	}
	if n := wakes(ls); n != 0 {
		t.Errorf("%d wakes with every message dropped", n)
	}
	w.flush()
	if !w.queued(key, 0) {
		t.Errorf("want no queue left:%s", w.state(key))
	}
}

// A Lock that gives up (its context ends) leaves the queue.
func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	w := newMemWorld(t, 3)
	holder, _ := w.locker(nil)
	waiter, _ := w.locker(&Options{Retry: memSlowRetry})
	const key = "redlock:{give-up}"
	lk, err := holder.TryLock(t.Context(), "give-up")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	wctx, cancel := context.WithCancel(t.Context())
	got := lockIn(wctx, waiter, "give-up")
	w.sleeping(1)
	if !w.queued(key, 1) {
		t.Fatalf("want the waiter queued on every master:%s", w.state(key))
	}
	cancel()
	if r := result(t, got, "the waiter"); r.err == nil {
		t.Fatal("Lock succeeded on a held key")
	}
	w.flush()
	if !w.queued(key, 0) {
		t.Errorf("the waiter that gave up is still queued:%s", w.state(key))
	}
}

// A waiter behind a dead one, whose holder vanished without a release
// (its keys expired): nobody is named, the key stays free, and the waiter,
// seeing on two polls that the queue ahead of it has not moved, makes its
// round; nobody was woken. Its own release then names the dead waiter and
// takes it off the queue.
func TestWaiterBehindDeadHeadAcquiresWhenHolderVanishes(t *testing.T) {
	w := newMemWorld(t, 5)
	holder, _ := w.locker(nil)
	waiter, _ := w.locker(&Options{Retry: RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}})
	const key = "redlock:{dead-head}"
	for i := range w.masters {
		w.run(i, "ZADD", key+queueSuffix, "1", "0123456789abcdef.1")
	}
	if _, err := holder.TryLock(t.Context(), "dead-head"); err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlockIn(t.Context(), waiter, "dead-head")
	w.sleeping(1)
	if !w.queued(key, 2) {
		t.Fatalf("want the dead waiter and the waiter queued:%s", w.state(key))
	}
	for i := range w.masters { // the holder's keys expire: no release, no message
		w.run(i, "DEL", key)
	}
	w.until("the waiter's acquisition", one, 100, func() bool { return len(got) > 0 })
	if err := doneOf(t, got, "the waiter"); err != nil {
		t.Fatal(err)
	}
	if n := Wakes(waiter); n != 0 {
		t.Errorf("%d wakes: nothing was released", n)
	}
	w.flush()
	if q := w.queue(0, key); len(q) != 0 || !w.queued(key, 0) {
		t.Errorf("want no queue left:%s", w.state(key))
	}
}
