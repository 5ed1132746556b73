package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// subscribed waits until key's channel has a subscriber on every master.
func subscribed(t *testing.T, c *lab.Masters, key string) {
	t.Helper()
	waitFor(t, "the waiter's subscriptions", func() bool {
		for i := range c.N() {
			n, err := c.Client(i).PubSubNumSub(t.Context(), key).Result()
			if err != nil || n[key] == 0 {
				return false
			}
		}
		return true
	})
}

// slowRetry is a policy whose first retry comes after at least 2.5s: a
// waiter that acquires sooner was woken by the release.
var slowRetry = redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}

// A waiting Lock retries as soon as the holder releases, not at its
// backoff; and one release wakes one waiter of a Locker, not all of them.
func TestReleaseWakesOneWaiter(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	holder := newLocker(t, c, nil)
	waiters := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	ctx := t.Context()
	lk, err := holder.TryLock(ctx, "baton")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		lk *redlock.Lock
		at time.Time
	}
	acquired := make(chan got, 2)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if lk, err := waiters.Lock(wctx, "baton"); err == nil {
				acquired <- got{lk, time.Now()}
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	subscribed(t, c, "redlock:{baton}")
	// Both waiters past their first round and registered for a wake: a
	// release before a waiter registered is no test of one wake per
	// release (a 50 ms sleep here let one through beside stress-ng).
	waitFor(t, "both waiters registered", func() bool { return redlock.Waiting(waiters) == 2 })
	// And both queued on every master: a master that has only one of
	// them names that one, so masters that disagree on the queue's head
	// each wake their own (two wakes for one release, as designed; beside
	// stress-ng a join still in flight at the release did this).
	waitFor(t, "both waiters queued on every master", func() bool {
		for i := range c.N() {
			if n, err := c.Client(i).ZCard(ctx, "redlock:{baton}:waiters").Result(); err != nil || n != 2 {
				return false
			}
		}
		return true
	})
	released := time.Now()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var first got
	select {
	case first = <-acquired:
	case <-time.After(2 * time.Second):
		t.Fatalf("no waiter acquired within 2s of the release (its backoff is ≥ 2.5s): not woken (wakes: %d)", redlock.Wakes(waiters))
	}
	t.Logf("woken waiter acquired %v after the release", first.at.Sub(released))
	if n := redlock.Wakes(waiters); n != 1 {
		t.Errorf("%d waiters woken by one release, want 1", n)
	}
	// The second waiter gets the next release.
	if err := first.lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case second := <-acquired:
		second.lk.Unlock(ctx)
	case <-time.After(2 * time.Second):
		t.Fatal("the second waiter was not woken by the next release")
	}
}

// A waiter whose release announcements are all lost still acquires, at
// its backoff.
func TestWaiterAcquiresWhenTheReleaseMessageIsLost(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	holder := newLocker(t, c, nil)
	waiter := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 200 * time.Millisecond, MaxDelay: 400 * time.Millisecond}})
	redlock.DropWakes(waiter)
	ctx := t.Context()
	lk, err := holder.TryLock(ctx, "lost-message")
	if err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlock(ctx, waiter, "lost-message")
	subscribed(t, c, "redlock:{lost-message}")
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
	if n := redlock.Wakes(waiter); n != 0 {
		t.Fatalf("%d wakes with every message dropped", n)
	}
}

// The subscriptions are dropped by the masters (CLIENT KILL): the waiter
// is subscribed again, and the next release still wakes it.
func TestSubscriptionDroppedAndRestored(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	holder := newLocker(t, c, nil)
	waiter := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	ctx := t.Context()
	lk, err := holder.TryLock(ctx, "dropped")
	if err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlock(ctx, waiter, "dropped")
	subscribed(t, c, "redlock:{dropped}")
	for i := range c.N() {
		if err := c.Client(i).ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
	}
	subscribed(t, c, "redlock:{dropped}") // go-redis reconnects and subscribes again
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
	if n := redlock.Wakes(waiter); n != 1 {
		t.Fatalf("%d wakes, want 1: the restored subscription carried the release", n)
	}
}

// Close ends the subscriptions (goleak in TestMain checks their
// goroutines) and a waiting Lock returns ErrClosed.
func TestCloseWhileWaiting(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	holder := newLocker(t, c, nil)
	waiter := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 50 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	lk, err := holder.TryLock(t.Context(), "closing-waiter")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(t.Context(), "closing-waiter")
		got <- err
	}()
	subscribed(t, c, "redlock:{closing-waiter}")
	waiter.Close()
	select {
	case err := <-got:
		if !errors.Is(err, redlock.ErrClosed) {
			t.Fatalf("Lock after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock still waiting 10s after Close")
	}
}

// lockThenUnlock runs l.Lock(resource) then Unlock in a goroutine; the
// channel gets the first error, or nil.
func lockThenUnlock(ctx context.Context, l *redlock.Locker, resource string) <-chan error {
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

// acquired fails t unless got says, within 10s, that the lock was taken
// and released.
func acquired(t *testing.T, got <-chan error) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
}

// Ring masters have no shared subscription (a Ring subscribes a channel on
// one shard): a waiter on them relies on its backoff, and nothing panics.
func TestRingMastersWaitOnBackoff(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	rings := func() []redis.UniversalClient {
		out := make([]redis.UniversalClient, c.N())
		for i, a := range c.Addrs() {
			r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"s": a}})
			t.Cleanup(func() { r.Close() })
			out[i] = r
		}
		return out
	}
	holder, err := redlock.New(rings(), &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	waiter, err := redlock.New(rings(), &redlock.Options{MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	lk, err := holder.TryLock(t.Context(), "ring")
	if err != nil {
		t.Fatal(err)
	}
	got := lockThenUnlock(t.Context(), waiter, "ring")
	time.Sleep(200 * time.Millisecond) // the waiter's first rounds fail
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
}

// Readers waiting behind a writer are all woken by its release (they
// share: none waits for another), not left to their backoff.
func TestWriterReleaseWakesEveryReader(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	writer := newLocker(t, c, nil)
	readers := newLocker(t, c, &redlock.Options{Retry: slowRetry})
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
	acquired := make(chan *redlock.Lock, n)
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
	subscribed(t, c, "redlock:{shelf}:w")
	// Every reader past its first round and registered for a wake: a
	// release before one registered would leave that reader to its
	// backoff, which is no test of the wake (a fixed sleep here depends on
	// the machine's load).
	waitFor(t, "every reader registered", func() bool { return redlock.Waiting(readers) == n })
	if err := wlk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(2 * time.Second)
	for i := range n {
		select {
		case lk := <-acquired:
			defer lk.Unlock(ctx)
		case <-timeout:
			t.Fatalf("%d of %d readers acquired within 2s of the writer's release (their backoff is ≥ 2.5s): not woken (wakes: %d)", i, n, redlock.Wakes(readers))
		}
	}
	// The readers share: a majority of masters list all of them at once.
	// (RLock returns at a majority, and the last masters' registrations may
	// still be on their way: wait for them. A master need not list them
	// all: readers woken by the first master's announcement may reach a
	// master before the writer's release does there, be refused by it,
	// and hold by the others; docs/design.md §19.)
	full := 0
	for i := range c.N() {
		var m int64
		var err error
		for end := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if m, err = c.Client(i).ZCard(ctx, "redlock:{shelf}:r").Result(); (err == nil && m == n) || time.Now().After(end) {
				break
			}
		}
		switch {
		case err != nil || m > n:
			t.Errorf("master %d: %d readers registered (%v), want at most %d", i, m, err, n)
		case m == n:
			full++
		default:
			t.Logf("master %d: %d of %d readers registered", i, m, n)
		}
	}
	if need := c.N()/2 + 1; full < need {
		t.Errorf("%d masters list all %d readers, want a majority (%d)", full, n, need)
	}
}
