package redlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Wake on release (docs/design.md §14), in a memWorld: a waiter acquires
// without its timer firing only when a release woke it. wake_test.go
// keeps the checks of go-redis's subscriptions on real masters.

// A release that names nobody (its holder never waited) wakes one waiter
// of a Locker, not all of them, and the next release the next. The
// second waiter starts once the first is registered, so it waits behind
// it in the Locker and joins no queue on the masters (docs/design.md
// §14.1); the release of the first, naming nobody, wakes it.
func TestReleaseWakesOneWaiter(t *testing.T) {
	w := newMemWorld(t, 5)
	holder, _ := w.locker(&Options{TTL: memLongTTL})
	waiters, _ := w.locker(&Options{TTL: memLongTTL, Retry: memMinuteRetry})
	const key = "redlock:{baton}"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lk, err := holder.TryLock(ctx, "baton")
	if err != nil {
		t.Fatal(err)
	}
	got1 := lockIn(ctx, waiters, "baton")
	w.sleeping(1)
	if n := Waiting(waiters); n != 1 {
		t.Fatalf("%d waiters registered, want the first", n)
	}
	w.advance(time.Millisecond)
	got2 := lockIn(ctx, waiters, "baton")
	w.sleeping(2)
	if n := Waiting(waiters); n != 2 {
		t.Fatalf("%d waiters registered, want 2", n)
	}
	for i := range w.masters {
		if q := w.queue(i, key); len(q) > 1 {
			t.Fatalf("master %d queues %q, want at most the first waiter", i, q)
		}
	}
	w.subscribed(waiters, key)
	w.releases(lk)
	first := lockOf(t, got1, "the first waiter")
	w.sleeping(1)
	if len(got2) != 0 {
		t.Fatal("the waiter behind acquired too: the release woke it")
	}
	if n := Wakes(waiters); n != 1 {
		t.Errorf("%d waiters woken by one release, want 1", n)
	}
	w.releases(first)
	second := lockOf(t, got2, "the second waiter")
	if n := Wakes(waiters); n != 2 {
		t.Errorf("%d wakes after two releases, want 2", n)
	}
	second.Unlock(ctx)
}

// A waiter whose release announcements are all lost still acquires, at
// its backoff.
func TestWaiterAcquiresWhenTheReleaseMessageIsLost(t *testing.T) {
	w := newMemWorld(t, 5)
	holder, _ := w.locker(nil)
	waiter, _ := w.locker(&Options{Retry: RetryPolicy{MinDelay: 200 * time.Millisecond, MaxDelay: 400 * time.Millisecond}})
	DropWakes(waiter)
	lk, err := holder.TryLock(t.Context(), "lost-message")
	if err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlockIn(t.Context(), waiter, "lost-message")
	w.sleeping(1)
	w.subscribed(waiter, "redlock:{lost-message}")
	w.releases(lk)
	w.until("the waiter's acquisition", one, 100, func() bool { return len(got) > 0 })
	if err := doneOf(t, got, "the waiter"); err != nil {
		t.Fatal(err)
	}
	if n := Wakes(waiter); n != 0 {
		t.Fatalf("%d wakes with every message dropped", n)
	}
}

// Close ends the subscriptions and a waiting Lock returns ErrClosed.
func TestCloseWhileWaiting(t *testing.T) {
	w := newMemWorld(t, 3)
	holder, _ := w.locker(nil)
	waiter, _ := w.locker(&Options{Retry: RetryPolicy{MinDelay: 50 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	const key = "redlock:{closing-waiter}"
	lk, err := holder.TryLock(t.Context(), "closing-waiter")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	got := lockIn(t.Context(), waiter, "closing-waiter")
	w.sleeping(1)
	w.subscribed(waiter, key)
	waiter.Close()
	r := result(t, got, "Lock after Close")
	if !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", r.err)
	}
	for i, mm := range w.masters {
		mm.mu.Lock()
		n := mm.m.Subscribers(key) + mm.m.Subscribers(WakeChannel(waiter, key))
		mm.mu.Unlock()
		if n != 0 {
			t.Errorf("master %d: %d subscriptions left after Close", i, n)
		}
	}
}

// Readers waiting behind a writer are all woken by its release (they
// share: none waits for another), not left to their backoff; a majority
// of masters then list all of them at once.
func TestWriterReleaseWakesEveryReader(t *testing.T) {
	w := newMemWorld(t, 5)
	writer, _ := w.locker(nil)
	readers, _ := w.locker(&Options{Retry: memSlowRetry})
	ctx := t.Context()
	wrw, err := writer.RWMutex("shelf")
	if err != nil {
		t.Fatal(err)
	}
	wlk, err := wrw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rrw, err := readers.RWMutex("shelf")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	acquired := make(chan *Lock, n)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range n {
		wg.Go(func() {
			if lk, err := rrw.RLock(rctx); err == nil {
				acquired <- lk
			}
		})
	}
	// Every reader past its first round and registered for a wake.
	w.sleeping(n)
	if got := Waiting(readers); got != n {
		t.Fatalf("%d readers registered, want %d", got, n)
	}
	w.subscribed(readers, "redlock:{shelf}:w")
	w.releases(wlk)
	for i := range n {
		select {
		case lk := <-acquired:
			defer lk.Unlock(context.Background())
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d readers acquired with no timer fired after the writer's release: not woken (wakes: %d)", i, n, Wakes(readers))
		}
	}
	if got := Wakes(readers); got != n {
		t.Errorf("%d wakes, want %d", got, n)
	}
	w.flush()
	full := 0
	for i := range w.masters {
		switch m := w.run(i, "ZCARD", "redlock:{shelf}:r").Int; {
		case m > n:
			t.Errorf("master %d: %d readers registered, want at most %d", i, m, n)
		case m == n:
			full++
		default:
			t.Logf("master %d: %d of %d readers registered", i, m, n)
		}
	}
	if need := len(w.masters)/2 + 1; full < need {
		t.Errorf("%d masters list all %d readers, want a majority (%d)", full, n, need)
	}
}
