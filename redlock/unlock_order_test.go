package redlock_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Held.Unlock closes Done before it writes the first release: with one of
// 3 masters stalled (the release round waits NodeTimeout for it), a second
// Locker never acquires the resource while the first Held's Err is nil,
// and Done is never seen open at or after Deadline(). 20 runs, all must
// pass. NodeTimeout exceeds a third of the window, so the Unlock, made
// when less than NodeTimeout/2 is left, spans the deadline.
func TestHeldUnlockEndsContextBeforeRelease(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl, nt = 400 * time.Millisecond, 300 * time.Millisecond
	opts := &redlock.Options{TTL: ttl, NodeTimeout: nt}
	l := newLocker(t, c, opts)
	l2 := newLocker(t, c, opts)
	ctx := t.Context()
	// Dial every master from l2 now: a round before that waits for all.
	warm, err := l2.TryLock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for run := range 20 {
		resource := fmt.Sprintf("unlock-order-%d", run)
		h, err := l.Hold(ctx, resource)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		// Unlock while less than NodeTimeout/2 is left: the release's wait
		// for the stalled master then spans the deadline.
		waitFor(t, "the deadline within NodeTimeout/2", func() bool {
			left := time.Until(h.Deadline())
			return left > 0 && left < nt/2
		})
		if err := c.Pause(2); err != nil {
			t.Fatal(err)
		}
		var unlocked atomic.Bool
		var wg sync.WaitGroup
		// The second Locker tries until it acquires or the Unlock returns.
		var acquiredWhileOpen atomic.Bool
		wg.Go(func() {
			for !unlocked.Load() {
				lk, err := l2.TryLock(ctx, resource)
				if err != nil {
					continue
				}
				if h.Err() == nil {
					acquiredWhileOpen.Store(true)
				}
				lk.Unlock(ctx)
				return
			}
		})
		// Samples of Done: the last instant it was seen open.
		var lastOpen atomic.Int64
		wg.Go(func() {
			for !unlocked.Load() {
				now := time.Now()
				if h.Err() == nil {
					lastOpen.Store(now.UnixNano())
				}
				time.Sleep(time.Millisecond) // sampling pace
			}
		})
		uerr := h.Unlock(ctx)
		unlocked.Store(true)
		wg.Wait()
		deadline := h.Deadline()
		if uerr != nil {
			t.Errorf("run %d: Unlock: %v", run, uerr)
		}
		if acquiredWhileOpen.Load() {
			t.Errorf("run %d: a second Locker acquired while the first Held's Err() was nil", run)
		}
		if at := lastOpen.Load(); at != 0 && !time.Unix(0, at).Before(deadline) {
			t.Errorf("run %d: Done still open %v after Deadline()", run, time.Unix(0, at).Sub(deadline))
		}
		if h.Err() == nil {
			t.Errorf("run %d: Err() nil after Unlock", run)
		}
		c.ResumeAll()
		// Every run starts with master 2 answering both Lockers again, so
		// that its release round waits for it rather than deferring.
		waitFor(t, "master 2 answering again", func() bool {
			for _, lk := range []*redlock.Locker{l, l2} {
				if st := lk.Stats()[2]; st.Skipped || st.Deferred > 0 {
					return false
				}
			}
			return true
		})
		waitGone(t, c, resource, "the released keys to go")
	}
}
