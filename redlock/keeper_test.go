package redlock_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// One keeper per Locker: 2 000 kept leases add a bounded number of
// goroutines (not one each), none is lost over several TTLs, and when
// extensions fail (3 of 5 masters SIGSTOPped) every lease's Done closes
// by its own Deadline(), however many fall due together.
func TestKeeperKeepsManyLeasesWithFewGoroutines(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 1500 * time.Millisecond
	const n = 2000
	l := newLocker(t, c, &redlock.Options{TTL: ttl, NodeTimeout: 150 * time.Millisecond})
	base := runtime.NumGoroutine()
	hs := make([]*redlock.Held, n)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += len(errs) {
				h, err := l.Hold(t.Context(), fmt.Sprintf("many-%d", i))
				if err != nil {
					errs[w] = err
					return
				}
				hs[i] = h
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.ResumeAll()
		for _, h := range hs {
			h.Unlock(t.Context())
		}
	}()
	// The keeper, its (at most 64) workers, and the Locker's own.
	const bound = 100
	start := time.Now()
	for time.Since(start) < 4*ttl {
		if g := runtime.NumGoroutine(); g-base > bound {
			t.Fatalf("%d leases kept with %d goroutines more than before any (bound %d)", n, g-base, bound)
		}
		for i, h := range hs {
			if err := h.Err(); err != nil {
				t.Fatalf("lease %d lost after %v: %v", i, time.Since(start), err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		r := fmt.Sprintf("many-%d", i)
		if got := majorityHolder(t, c, r); got != hs[i].Token() {
			t.Fatalf("%s: the majority does not hold the token: %q", r, keyState(t, c, r))
		}
	}

	for _, i := range []int{0, 1, 2} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	stalled := time.Now()
	worst := -time.Hour // latest declaration relative to its deadline
	for i, h := range hs {
		select {
		case <-h.Done():
		case <-time.After(10 * ttl):
			t.Fatalf("lease %d: Done not closed %v after 3 of 5 masters stalled", i, 10*ttl)
		}
		deadline := h.Deadline()
		// The loss timer fires 10ms before the deadline; with 2 000 of
		// them due at once under -race on 2 loaded cores some run late:
		// a margin of 100ms, as TestHoldKeepsAndSignalsLoss allows for
		// seeing Done, and the worst lateness is logged.
		at := redlock.LostAt(h)
		if at.IsZero() || at.Sub(deadline) > 100*time.Millisecond {
			t.Fatalf("lease %d declared lost at %v, %v after its deadline", i, at, at.Sub(deadline))
		}
		worst = max(worst, at.Sub(deadline))
		if deadline.Before(stalled) {
			t.Fatalf("lease %d: its deadline passed %v before the stall", i, stalled.Sub(deadline))
		}
		if !errors.Is(h.Err(), redlock.ErrLost) {
			t.Fatalf("lease %d: Err() = %v, want ErrLost", i, h.Err())
		}
	}
	t.Logf("%d leases lost on the stall; the latest declaration was %v relative to its deadline", n, worst)
}
