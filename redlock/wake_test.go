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

// minuteRetry is a policy whose retries come a minute apart, and longHold
// a holder's TTL past the wake tests' guard: a waiter that acquires within
// wakeGuard of a release was woken by it, not by its backoff or by the
// holder's keys expiring.
var (
	minuteRetry = redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}
	longHold    = &redlock.Options{TTL: 2 * time.Minute}
	wakeGuard   = 30 * time.Second
)

// startLock calls l.Lock(ctx, resource) in a goroutine; its lock comes
// on the channel, with when it was acquired.
func startLock(t *testing.T, ctx context.Context, l *redlock.Locker, resource string) <-chan taken {
	got := make(chan taken, 1)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		if lk, err := l.Lock(ctx, resource); err == nil {
			got <- taken{lk, time.Now()}
		}
	})
	return got
}

type taken struct {
	lk *redlock.Lock
	at time.Time
}

// wokenBy waits for the lock got brings, which a release at released
// must have woken (within wakeGuard, before any backoff or expiry), and
// fails if the waiter behind it (behind) acquires first.
func wokenBy(t *testing.T, got, behind <-chan taken, released time.Time) *redlock.Lock {
	t.Helper()
	select {
	case g := <-got:
		t.Logf("woken waiter acquired %v after the release", g.at.Sub(released))
		return g.lk
	case <-behind:
		t.Fatal("the waiter behind acquired first: the release woke it too")
	case <-time.After(wakeGuard):
		t.Fatalf("no waiter acquired within %v of the release (backoff %v, holder's TTL %v): not woken", wakeGuard, minuteRetry.MinDelay, longHold.TTL)
	}
	return nil
}

// A release that names nobody (its holder never waited) wakes one waiter
// of a Locker, not all of them, and the next release the next. The
// second waiter starts once the first is registered, so it waits behind
// it in the Locker and joins no queue on the masters (docs/design.md
// §14.1); the release of the first, naming nobody, wakes it.
func TestReleaseWakesOneWaiter(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	holder := newLocker(t, c, longHold)
	waiters := newLocker(t, c, &redlock.Options{TTL: longHold.TTL, Retry: minuteRetry})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lk, err := holder.TryLock(ctx, "baton")
	if err != nil {
		t.Fatal(err)
	}
	got1 := startLock(t, ctx, waiters, "baton")
	waitFor(t, "the first waiter registered", func() bool { return redlock.Waiting(waiters) == 1 })
	got2 := startLock(t, ctx, waiters, "baton")
	waitFor(t, "the second waiter registered", func() bool { return redlock.Waiting(waiters) == 2 })
	for i := range c.N() {
		if n, err := c.Client(i).ZCard(ctx, "redlock:{baton}:waiters").Result(); err != nil || n > 1 {
			t.Fatalf("master %d queues %d waiters (%v), want at most the first", i, n, err)
		}
	}
	subscribed(t, c, "redlock:{baton}")
	released := time.Now()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := wokenBy(t, got1, got2, released)
	if n := redlock.Wakes(waiters); n != 1 {
		t.Errorf("%d waiters woken by one release, want 1", n)
	}
	released = time.Now()
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := wokenBy(t, got2, nil, released)
	if n := redlock.Wakes(waiters); n != 2 {
		t.Errorf("%d wakes after two releases, want 2", n)
	}
	second.Unlock(ctx)
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
