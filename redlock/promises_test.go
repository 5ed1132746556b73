package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A released lock ends every context derived from it (docs/design.md §8,
// §17). These tests pin that rule where it used to break: a Shutdown that
// releases a lock between Do's or Hold's Lock and the keeping of it, a
// Keep of a lock already released, and the kinds of lock Shutdown took
// no notice of.

// keysHolding is how many masters' key for resource holds token.
func keysHolding(ctx context.Context, c *lab.Masters, resource, token string) int {
	n := 0
	for i := range c.N() {
		if v, err := c.Client(i).Get(ctx, "redlock:{"+resource+"}").Result(); err == nil && v == token {
			n++
		}
	}
	return n
}

// Shutdown releasing the lock in the window between Do's (or Hold's) Lock
// and the keeping of it: fn never runs, Do and Hold fail with ErrClosed,
// and the lock is free for another Locker at once.
func TestShutdownBetweenLockAndKeep(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	other := newLocker(t, c, nil)
	for _, kind := range []string{"Do", "Hold"} {
		t.Run(kind, func(t *testing.T) {
			a := newLocker(t, c, nil)
			resource := "between-" + kind
			redlock.SetAfterLock(a, func() {
				if err := a.Shutdown(ctx); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			})
			ran := false
			var err error
			switch kind {
			case "Do":
				err = a.Do(ctx, resource, func(ctx context.Context) error {
					ran = true
					return nil
				})
			case "Hold":
				var h *redlock.Held
				h, err = a.Hold(ctx, resource)
				if h != nil {
					ran = h.Err() == nil
				}
			}
			if ran {
				t.Errorf("%s handed out live work on a lock Shutdown had released", kind)
			}
			if !errors.Is(err, redlock.ErrClosed) {
				t.Errorf("%s: %v, want ErrClosed", kind, err)
			}
			lk, err := other.TryLock(ctx, resource)
			if err != nil {
				t.Fatalf("another Locker's TryLock after the Shutdown: %v", err)
			}
			_ = lk.Unlock(ctx)
		})
	}
}

// The race of point 1 with real timing: B holds; A's Do waits in the
// queue; B unlocks; A's Shutdown comes 0-3 ms later. Whenever fn sees
// fewer than a majority of keys holding its token (a release of its lock
// deleted them), its context is done already.
func TestShutdownRacingDo(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	b := newLocker(t, c, nil)
	const runs = 24
	ranLive := 0
	for run := range runs {
		resource := "race-do-" + strconv.Itoa(run)
		a := newLocker(t, c, nil)
		lkB, err := b.TryLock(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		var violations, live atomic.Int32
		done := make(chan error, 1)
		go func() {
			done <- a.Do(ctx, resource, func(fctx context.Context) error {
				lk, _ := redlock.FromContext(fctx)
				until := time.Now().Add(time.Second)
				for fctx.Err() == nil && time.Now().Before(until) {
					n := keysHolding(ctx, c, resource, lk.Token())
					if n < 3 && fctx.Err() == nil {
						violations.Add(1)
					}
					live.Store(1)
					time.Sleep(time.Millisecond)
				}
				return nil
			})
		}()
		waitFor(t, "A's Do waiting", func() bool { return redlock.Waiting(a) == 1 })
		if err := lkB.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.N(3001)) * time.Microsecond)
		_ = a.Shutdown(ctx)
		<-done
		if v := violations.Load(); v > 0 {
			t.Errorf("run %d: fn's context live while its token was on fewer than 3 masters (%d readings)", run, v)
		}
		ranLive += int(live.Load())
		if n := keysHolding(ctx, c, resource, ""); n != 0 {
			t.Errorf("run %d: %d masters have an empty key", run, n)
		}
		waitGone(t, c, resource, "the keys of "+resource+" after Shutdown")
	}
	t.Logf("%d of %d runs ran fn before the Shutdown", ranLive, runs)
}

// Keep of a lock already released, by its Unlock or by Shutdown, returns a
// Held that is over: Done closed, Err context.Canceled.
func TestKeepOfReleasedLockIsEnded(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(ctx, "keep-after-unlock")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ended := func(what string, h *redlock.Held) {
		t.Helper()
		select {
		case <-h.Done():
		default:
			t.Errorf("%s: Done open", what)
		}
		if !errors.Is(h.Err(), context.Canceled) {
			t.Errorf("%s: Err %v, want context.Canceled", what, h.Err())
		}
		if !errors.Is(h.Context().Err(), context.Canceled) {
			t.Errorf("%s: Context().Err() %v", what, h.Context().Err())
		}
	}
	h := lk.Keep()
	ended("Keep after Unlock", h)
	if err := h.Unlock(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Errorf("Unlock of that Held: %v, want ErrUnlocked", err)
	}

	lk2, err := l.TryLock(ctx, "keep-after-shutdown")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ended("Keep after Shutdown", lk2.Keep())
	other := newLocker(t, c, nil)
	if lk, err := other.TryLock(ctx, "keep-after-shutdown"); err != nil {
		t.Errorf("TryLock after Shutdown released it: %v", err)
	} else {
		_ = lk.Unlock(ctx)
	}
}

// Shutdown releases, and ends the contexts of, every kind of lock the
// Locker handed out: a kept mutex lock, a kept permit, a kept read lock, a
// write lock, an adopted lock and a lock handed over by the masters
// (§14.3), with one master stalled throughout. Another Locker takes each
// at once afterwards.
func TestShutdownEndsEveryPrimitive(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	const nt = 300 * time.Millisecond
	a := newLocker(t, c, &redlock.Options{NodeTimeout: nt})
	b := newLocker(t, c, &redlock.Options{NodeTimeout: nt})

	// The handed lock first, while every master answers (the handoff
	// helpers want all five): B holds, A waits and is handed the key.
	lkB, got, _ := bWaits(ctx, t, c, b, a, "sd-handed")
	if err := lkB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	handed := takes(t, got, "A")
	if err := c.Pause(4); err != nil {
		t.Fatal(err)
	}

	mutex, err := a.Hold(ctx, "sd-mutex")
	if err != nil {
		t.Fatal(err)
	}
	sem, err := a.Semaphore("sd-sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	permit, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keptPermit := permit.Keep()
	rwR, err := a.RWMutex("sd-rw-r")
	if err != nil {
		t.Fatal(err)
	}
	rlock, err := rwR.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keptRead := rlock.Keep()
	rwW, err := a.RWMutex("sd-rw-w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rwW.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	lkO, err := b.TryLock(ctx, "sd-adopted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Adopt(ctx, "sd-adopted", lkO.Token()); err != nil {
		t.Fatal(err)
	}
	keptHanded := handed.Keep()

	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for name, h := range map[string]*redlock.Held{"mutex": mutex, "permit": keptPermit, "read": keptRead, "handed": keptHanded} {
		if !errors.Is(h.Err(), context.Canceled) {
			t.Errorf("%s: Err %v after Shutdown, want context.Canceled", name, h.Err())
		}
	}
	for _, r := range []string{"sd-mutex", "sd-adopted", "sd-handed"} {
		if lk, err := b.TryLock(ctx, r); err != nil {
			t.Errorf("%s: TryLock after Shutdown: %v", r, err)
		} else {
			_ = lk.Unlock(ctx)
		}
	}
	semB, err := b.Semaphore("sd-sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	if lk, err := semB.TryAcquire(ctx); err != nil {
		t.Errorf("permit: TryAcquire after Shutdown: %v", err)
	} else {
		_ = lk.Unlock(ctx)
	}
	for _, name := range []string{"sd-rw-r", "sd-rw-w"} {
		rw, err := b.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		if lk, err := rw.TryLock(ctx); err != nil {
			t.Errorf("%s: write TryLock after Shutdown: %v", name, err)
		} else {
			_ = lk.Unlock(ctx)
		}
	}
}
