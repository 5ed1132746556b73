package redlocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// On in-process masters too, a release wakes a waiting Lock long before
// its backoff (≥ 2.5s) would retry.
func TestReleaseWakesWaiter(t *testing.T) {
	m := redlocktest.New(t, nil)
	// A MasterTimeout generous for -race on two loaded cores: the default
	// 50ms once timed out a cold Locker's first round on four of the five
	// in-process masters. The wake is what this test is about.
	const nodeTimeout = 500 * time.Millisecond
	holder, err := m.Locker(&redlock.Options{MasterTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := m.Locker(&redlock.Options{MasterTimeout: nodeTimeout, Retry: redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := holder.TryLock(t.Context(), "wake")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(t.Context(), "wake")
		if err == nil {
			err = lk.Unlock(context.WithoutCancel(t.Context()))
		}
		got <- err
	}()
	// The waiter's first round failed and it subscribed on every master.
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < m.N(); {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter is subscribed on %d of %d masters", n, m.N())
		}
		time.Sleep(5 * time.Millisecond)
		n = 0
		for _, c := range m.Clients() {
			if subs, err := c.PubSubNumSub(t.Context(), "redlock:{wake}").Result(); err == nil && subs["redlock:{wake}"] > 0 {
				n++
			}
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}
