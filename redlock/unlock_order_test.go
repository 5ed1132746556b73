package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Held.Unlock, and Do's release, close the lock's context before the first
// release is written: with one of 3 masters stalled (the release round
// waits MasterTimeout for it), a second Locker never acquires the resource
// while the first holder's context is live, and that context is never seen
// live at or after Deadline(). 20 runs of each, all must pass. A release
// started when less than MasterTimeout − 100ms is left spans the deadline
// (MasterTimeout exceeds a third of the window, where Do's keeper extends).
func TestHeldUnlockEndsContextBeforeRelease(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl, nt = 400 * time.Millisecond, 300 * time.Millisecond
	opts := &redlock.Options{TTL: ttl, MasterTimeout: nt}
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
	// nearDeadline waits until less than MasterTimeout − 100ms is left,
	// then stalls master 2. It reports false, stalling nothing, when it
	// saw that too late (60ms or less left: a loaded machine).
	nearDeadline := func(lk *redlock.Lock) bool {
		waitFor(t, "the deadline within MasterTimeout − 100ms", func() bool {
			return time.Until(lk.Deadline()) < nt-100*time.Millisecond
		})
		if time.Until(lk.Deadline()) <= 60*time.Millisecond {
			return false
		}
		if err := c.Pause(2); err != nil {
			t.Fatal(err)
		}
		return true
	}
	// check runs release (which returns the lock's context and Lock once
	// they exist) while a second Locker tries the resource and a sampler
	// watches the context.
	check := func(name, resource string, release func(ready chan<- context.Context) (*redlock.Lock, error)) {
		ready := make(chan context.Context, 1)
		var unlocked atomic.Bool
		var acquiredWhileOpen atomic.Bool
		var lastOpen atomic.Int64 // the last instant the context was seen live
		var wg sync.WaitGroup
		wg.Go(func() {
			hctx := <-ready
			wg.Go(func() {
				for !unlocked.Load() {
					lk, err := l2.TryLock(ctx, resource)
					if err != nil {
						continue
					}
					if hctx.Err() == nil {
						acquiredWhileOpen.Store(true)
					}
					lk.Unlock(ctx)
					return
				}
			})
			observe(time.Now().Add(10*time.Minute), time.Millisecond, func() bool {
				if unlocked.Load() {
					return false
				}
				if now := time.Now(); hctx.Err() == nil {
					lastOpen.Store(now.UnixNano())
				}
				return true
			})
		})
		lk, err := release(ready)
		unlocked.Store(true)
		select {
		case ready <- ctx: // release never got that far: let the watcher go
		default:
		}
		wg.Wait()
		switch {
		case errors.Is(err, redlock.ErrLost):
			// The deadline passed before the release began: a loaded
			// machine, not what this test is about.
			t.Logf("%s: %v", name, err)
		case err != nil:
			t.Errorf("%s: %v", name, err)
		}
		if acquiredWhileOpen.Load() {
			t.Errorf("%s: a second Locker acquired while the first holder's context was live", name)
		}
		if at := lastOpen.Load(); lk != nil && at != 0 && !time.Unix(0, at).Before(lk.Deadline()) {
			t.Errorf("%s: context still live %v after Deadline()", name, time.Unix(0, at).Sub(lk.Deadline()))
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
	for run := range 20 {
		resource := fmt.Sprintf("unlock-order-%d", run)
		check(fmt.Sprintf("Held.Unlock run %d", run), resource, func(ready chan<- context.Context) (*redlock.Lock, error) {
			// Kept only once near the deadline, so that no extension
			// moves it meanwhile; the keeper's first is tens of ms away.
			var lk *redlock.Lock
			for {
				var err error
				if lk, err = l.TryLock(ctx, resource); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				if nearDeadline(lk) {
					break
				}
				lk.Unlock(ctx) // seen too late: again
			}
			h := lk
			keepErr := h.Keep()
			switch {
			case keepErr == nil:
			case errors.Is(keepErr, redlock.ErrLost) && !time.Now().Before(h.Deadline()):
				// The deadline passed between nearDeadline's look and
				// Keep (a loaded machine): Keep must then fail, and the
				// run goes on as one whose release came too late.
			default:
				t.Errorf("run %d: Keep: %v", run, keepErr)
			}
			ready <- h.Context()
			err := h.Unlock(ctx)
			if h.Err() == nil {
				t.Errorf("run %d: Err() nil after Unlock", run)
			}
			if err == nil && keepErr != nil {
				t.Errorf("run %d: Unlock of a lock lost before Keep returned nil", run)
			}
			return h, err
		})
	}
	for run := range 20 {
		resource := fmt.Sprintf("do-release-order-%d", run)
		check(fmt.Sprintf("Do run %d", run), resource, func(ready chan<- context.Context) (*redlock.Lock, error) {
			var lk *redlock.Lock
			err := l.Do(ctx, resource, func(fctx context.Context) error {
				lk, _ = redlock.FromContext(fctx)
				for !nearDeadline(lk) {
					// Seen too late: wait for the keeper's next extension.
					waitFor(t, "the keeper to extend", func() bool {
						return fctx.Err() != nil || time.Until(lk.Deadline()) >= nt-100*time.Millisecond
					})
					if fctx.Err() != nil {
						return fmt.Errorf("lost while waiting: %w", context.Cause(fctx))
					}
				}
				ready <- fctx
				return nil
			})
			return lk, err
		})
	}
}
