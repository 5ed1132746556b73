package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// majorityHolder reports the value a majority of masters hold for
// resource ("" if none).
func majorityHolder(t *testing.T, c *lab.Masters, resource string) string {
	vals := keyState(t, c, resource)
	for _, v := range vals {
		if v != "" && countValue(vals, v) >= c.N()/2+1 {
			return v
		}
	}
	return ""
}

// Do keeps the lock for 5× its TTL.
func TestDoKeepsTheLockAlive(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 300 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 40 * time.Millisecond})
	var polls int
	err := l.Do(t.Context(), "kept", func(ctx context.Context) error {
		if lk, ok := redlock.FromContext(ctx); !ok || lk.Resource() != "kept" || !lk.Valid() {
			t.Errorf("FromContext: %v, %v", lk, ok)
		}
		start := time.Now()
		holder := majorityHolder(t, c, "kept")
		var err error
		observe(start.Add(5*ttl), 5*time.Millisecond, func() bool {
			if err = ctx.Err(); err != nil {
				t.Errorf("fn's ctx ended after %v: %v (cause %v)", time.Since(start), err, context.Cause(ctx))
				return false
			}
			if h := majorityHolder(t, c, "kept"); h == "" || h != holder {
				t.Errorf("after %v no majority holds the token (%q)", time.Since(start), keyState(t, c, "kept"))
				return false
			}
			polls++
			return true
		})
		return err
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if polls < 10 {
		t.Fatalf("only %d observations", polls)
	}
	if got := keyState(t, c, "kept"); countValue(got, "") != 5 {
		t.Fatalf("keys left after Do: %q", got)
	}
}

// Losing the quorum cancels fn's ctx by Deadline(), with cause ErrLost.
// The instant the context ends is the loss timer's reading, not when fn's
// goroutine was scheduled to see it; a runtime that fires the timer later
// than its lead (a starved process: a pause, assumption 4) is allowed the
// SafetyMargin, as a paused holder is. The exact promise, on a clock no
// load can delay, is the simulator's (rows kept*: DoneByDeadline).
func TestDoCancelsOnLoss(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 500 * time.Millisecond
	const margin = 100 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 40 * time.Millisecond, SafetyMargin: margin})
	window := ttl - (ttl/100 + 2*time.Millisecond) // TTL − drift
	var pausedAt, cancelledAt atomic.Int64
	var deadline, lostAt time.Time
	fnErr := errors.New("fn saw its ctx end")
	err := l.Do(t.Context(), "doomed", func(ctx context.Context) error {
		lk, _ := redlock.FromContext(ctx)
		for _, i := range []int{0, 2, 4} {
			if err := c.Pause(i); err != nil {
				t.Error(err)
			}
		}
		pausedAt.Store(time.Now().UnixNano())
		<-ctx.Done()
		cancelledAt.Store(time.Now().UnixNano())
		deadline, lostAt = lk.Deadline(), redlock.LostAt(lk)
		if !errors.Is(context.Cause(ctx), redlock.ErrLost) {
			t.Errorf("context.Cause = %v, want ErrLost", context.Cause(ctx))
		}
		return fnErr
	})
	if !errors.Is(err, redlock.ErrLost) || !errors.Is(err, fnErr) {
		t.Fatalf("Do: %v, want it to wrap ErrLost and fn's error", err)
	}
	// An extension that started before the pause may have moved the
	// deadline to at most pausedAt + window; none after it can succeed.
	latest := time.Unix(0, pausedAt.Load()).Add(window)
	if deadline.After(latest) {
		t.Fatalf("Deadline() %v after the latest possible one", deadline.Sub(latest))
	}
	// fn's ctx is done by the lock's own deadline, not some time after.
	if lostAt.IsZero() || !lostAt.Before(deadline.Add(margin)) {
		t.Fatalf("fn's ctx was ended at %v, Deadline() %v (fn saw it %v after the deadline)", lostAt, deadline, time.Unix(0, cancelledAt.Load()).Sub(deadline))
	}
}

func TestDoBadInputAndPlainErrors(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	if err := l.Do(t.Context(), "x", nil); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Do with nil fn: %v", err)
	}
	if err := l.Do(t.Context(), "", func(context.Context) error { return nil }); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Do with empty resource: %v", err)
	}
	boom := errors.New("boom")
	if err := l.Do(t.Context(), "x", func(context.Context) error { return boom }); !errors.Is(err, boom) || errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Do returning fn's error: %v", err)
	}
	if got := keyState(t, c, "x"); countValue(got, "") != 3 {
		t.Fatalf("keys left after fn failed: %q", got)
	}
}
