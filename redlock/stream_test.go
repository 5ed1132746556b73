package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// A stalled master gets nothing new once it has been silent for
// MasterTimeout: while 8 workers run 200 rounds more, every command written
// to it was written before the breaker opened, and it counts as answering
// again only when it replies (after the resume), which also delivers the
// releases held back meanwhile.
func TestStalledMasterGetsNothingUntilItAnswers(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const nt = 50 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{MasterTimeout: nt})
	lk, err := l.TryLock(t.Context(), "warm-up") // connect to all five
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	before := l.Stats()[0].Written
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops, fails, waitedOn atomic.Int64
	var openedAt atomic.Int64 // unix ns: the breaker is open from here on
	openedAt.Store(math.MaxInt64)
	var skippedAt atomic.Int64 // unix ns: the test saw master 0 skipped
	skippedAt.Store(math.MaxInt64)
	var fresh [8]atomic.Bool // the worker ended a round it began after skippedAt
	for w := range 8 {
		wg.Go(func() {
			res := fmt.Sprintf("stall-%d", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now().UnixNano()
				lk, err := l.TryLock(t.Context(), res)
				if began > skippedAt.Load() {
					fresh[w].Store(true)
				}
				if err != nil {
					// Live masters that missed MasterTimeout (a loaded
					// machine) fail a round; the stalled one, once
					// skipped, must never be what a round waited for.
					fails.Add(1)
					var e *redlock.Error
					if errors.As(err, &e) && len(e.Masters) > 0 && e.Masters[0].Outcome == quorum.TimedOut && began > openedAt.Load() {
						waitedOn.Add(1)
					}
					continue
				}
				lk.Unlock(t.Context())
				ops.Add(1)
			}
		})
	}
	// Once the breaker is open, and every round begun before is over
	// (each worker has ended one begun after), the count must not move.
	waitFor(t, "master 0 to be skipped", func() bool { return l.Stats()[0].Skipped })
	skippedAt.Store(time.Now().UnixNano())
	waitFor(t, "every worker's round begun after the breaker opened", func() bool {
		for i := range fresh {
			if !fresh[i].Load() {
				return false
			}
		}
		return true
	})
	opened := l.Stats()[0]
	openedAt.Store(time.Now().UnixNano())
	rounds := ops.Load() + fails.Load()
	waitWithin(t, "200 rounds with master 0 stalled", time.Minute, func() bool { return ops.Load()+fails.Load()-rounds >= 200 })
	close(stop)
	wg.Wait()
	after := l.Stats()[0]
	if after.Written != opened.Written {
		t.Fatalf("%d commands written to the stalled master after its breaker opened (%d before)", after.Written-opened.Written, opened.Written)
	}
	if !after.Skipped || waitedOn.Load() != 0 || ops.Load() == 0 {
		t.Fatalf("skipped %v, %d ops, %d failed rounds waited for the stalled master; want skipped, ops, and none", after.Skipped, ops.Load(), waitedOn.Load())
	}
	t.Logf("%d ops with master 0 stalled (%d rounds failed on live masters); %d commands were written to it before its breaker opened, %d releases deferred", ops.Load(), fails.Load(), opened.Written-before, after.Deferred)
	c.ResumeAll()
	// It answers what it had; the deferred releases follow, and nothing
	// of ours is left on it.
	waitFor(t, "the deferred releases to be delivered", func() bool { s := l.Stats()[0]; return !s.Skipped && s.Deferred == 0 })
	for w := range 8 {
		waitGone(t, c, fmt.Sprintf("stall-%d", w), "keys on the woken master to be released")
	}
	if _, err := l.TryLock(t.Context(), "after"); err != nil {
		t.Fatal(err)
	}
}

// A TryLock cancelled in its first microseconds returns at once, leaves no
// key, and does not make healthy masters look unavailable.
func TestTryLockCancelledAtOnce(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{MasterTimeout: 100 * time.Millisecond})
	var slow int
	for i := range 300 {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i%6)*100*time.Microsecond, cancel) // 0–500 µs
		start := time.Now()
		lk, err := l.TryLock(ctx, "cancelled")
		took := time.Since(start)
		cancel()
		if err == nil {
			lk.Unlock(t.Context())
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: %v, want context.Canceled", i, err)
		}
		if took > 50*time.Millisecond { // a whole MasterTimeout would be 100 ms
			slow++
		}
		noKeyOn(t, c, "cancelled", 0, 1, 2, 3, 4)
	}
	if slow > 3 {
		t.Fatalf("%d of 300 cancelled TryLocks took over half a MasterTimeout", slow)
	}
	lk, err := l.TryLock(t.Context(), "cancelled")
	if err != nil {
		t.Fatal(err)
	}
	if n := countValue(keyState(t, c, "cancelled"), lk.Token()); n < 3 {
		t.Fatalf("token on %d masters", n)
	}
	for i, s := range l.Stats() {
		if s.Skipped {
			t.Errorf("master %d is skipped after cancelled calls", i)
		}
	}
	// Every master still gets the round: all five answer.
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "cancelled"), lk.Token()) == 5 })
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The plain path (through the go-redis clients) keeps the same promises:
// keys on a majority, nothing left after Unlock, a stalled master skipped,
// and its keys released once it wakes.
func TestViaClient(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{ViaClient: true, MasterTimeout: 100 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "plain"), lk.Token()) == 5 })
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	noKeyOn(t, c, "plain", 0, 1, 2, 3, 4)
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		lk, err := l.TryLock(t.Context(), "plain")
		if err != nil {
			t.Fatalf("round %d with master 0 stalled: %v", round, err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		noKeyOn(t, c, "plain", 1, 2, 3, 4)
	}
	if !l.Stats()[0].Skipped {
		t.Fatal("the stalled master is not skipped")
	}
	c.ResumeAll()
	waitGone(t, c, "plain", "the woken master's keys to be released")
}
