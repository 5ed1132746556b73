package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Extend succeeds only when the new deadline is ahead once the majority
// answered, the rule Acquire follows: WithTTL(160ms) leaves a 56ms window
// with SafetyMargin 100ms, and masters answering in ≥ 80ms (40ms each way
// through the lab proxy) cannot grant it. The lock does not keep its old
// deadline either: a failed extension with a shorter TTL moves the
// deadline to its own window (§6, item 5).
func TestExtendNeverSucceedsPastItsDeadline(t *testing.T) {
	c := lab.ForTest(t, 3, &lab.Options{Proxy: true})
	l := newLocker(t, c, &redlock.Options{TTL: 3 * time.Second, SafetyMargin: 100 * time.Millisecond, MasterTimeout: 150 * time.Millisecond})
	ctx := t.Context()
	for i := range c.N() {
		if err := c.Latency(i, 40*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for run := range 5 {
		lk, err := l.Lock(ctx, "slow-extend")
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		err = lk.Extend(ctx, redlock.WithTTL(160*time.Millisecond))
		now := time.Now()
		if err == nil {
			t.Errorf("run %d: Extend returned nil with Deadline() %v away", run, lk.Deadline().Sub(now))
		} else if !errors.Is(err, redlock.ErrLost) {
			t.Errorf("run %d: Extend: %v, want ErrLost", run, err)
		}
		// The masters may now expire the key 160ms after the extension
		// started: the deadline is no later than its window.
		if lk.Valid() {
			t.Errorf("run %d: still Valid() after the shortening extension failed, Deadline() %v away", run, lk.Deadline().Sub(now))
		}
		lk.Unlock(ctx)
		waitGone(t, c, "slow-extend", "the lock's keys to go")
	}
	// A longer TTL through the same latency extends.
	lk, err := l.Lock(ctx, "slow-extend")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Extend(ctx, redlock.WithTTL(2*time.Second)); err != nil || !lk.Valid() {
		t.Fatalf("Extend(WithTTL(2s)): %v, Valid %v", err, lk.Valid())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
