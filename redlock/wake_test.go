package redlock_test

import (
	"context"
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
	waitFor(t, "the waiter's first round failed", func() bool { return redlock.Waiting(waiter) == 1 })
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
}
