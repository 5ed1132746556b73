package redlock_test

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A live holder whose keeper extends its lock: a waiter woken at each
// expiry the PTTLs announced finds the key extended and waits again,
// without a round more than its reads call for; it acquires when the
// holder releases.
func TestWaiterWokenAtExpiryOfAnExtendedLockWaitsAgain(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	holder := newLocker(t, c, &redlock.Options{TTL: 300 * time.Millisecond, MasterTimeout: 100 * time.Millisecond})
	h, err := redlock.Hold(holder, ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	waiter := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 3 * time.Second, MaxDelay: 3 * time.Second}})
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, "kept")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	queued(t, c, "redlock:{kept}", 1)
	before := setCalls(t, c)
	// Five extensions (each moving the expiry the waiter's last read
	// announced), seen as the key's PTTL going up on master 0.
	var last time.Duration
	extended := 0
	waitFor(t, "five extensions of the holder's lock", func() bool {
		d, err := c.Client(0).PTTL(ctx, "redlock:{kept}").Result()
		if err == nil && d > last {
			extended++
		}
		last = d
		return extended > 5 // the first read is no extension
	})
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was kept: %v", err)
	default:
	}
	for m, a := range setCalls(t, c) {
		// The reads (PTTL) see the extended key: no SET is sent. A round
		// at a wake whose expiry a keeper moved would be one SET a wake.
		if d := a - before[m]; d != 0 {
			t.Errorf("master %d executed %d SETs while the holder kept its lock, want 0", m, d)
		}
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
}
