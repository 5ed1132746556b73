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
				var h *redlock.Lock
				h, err = redlock.Hold(a, ctx, resource)
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
				observe(time.Now().Add(time.Second), time.Millisecond, func() bool {
					if fctx.Err() != nil {
						return false
					}
					n := keysHolding(ctx, c, resource, lk.Token())
					if n < 3 && fctx.Err() == nil {
						violations.Add(1)
					}
					live.Store(1)
					return true
				})
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

// Keep of a lock already released, by its Unlock or by Shutdown, fails
// (ErrUnlocked, ErrClosed), and the lock is over: Done closed, Err
// context.Canceled.
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
	ended := func(what string, h *redlock.Lock) {
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
	if err := lk.Keep(); !errors.Is(err, redlock.ErrUnlocked) {
		t.Errorf("Keep after Unlock: %v, want ErrUnlocked", err)
	}
	ended("Keep after Unlock", lk)
	if err := lk.Unlock(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Errorf("Unlock again: %v, want ErrUnlocked", err)
	}

	lk2, err := l.TryLock(ctx, "keep-after-shutdown")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lk2.Keep(); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Keep after Shutdown: %v, want ErrClosed", err)
	}
	ended("Keep after Shutdown", lk2)
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
	a := newLocker(t, c, &redlock.Options{MasterTimeout: nt})
	b := newLocker(t, c, &redlock.Options{MasterTimeout: nt})

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

	mutex, err := redlock.Hold(a, ctx, "sd-mutex")
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
	if err := permit.Keep(); err != nil {
		t.Fatal(err)
	}
	keptPermit := permit
	rwR, err := a.RWMutex("sd-rw-r")
	if err != nil {
		t.Fatal(err)
	}
	rlock, err := rwR.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rlock.Keep(); err != nil {
		t.Fatal(err)
	}
	keptRead := rlock
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
	if err := handed.Keep(); err != nil {
		t.Fatal(err)
	}
	keptHanded := handed

	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for name, h := range map[string]*redlock.Lock{"mutex": mutex, "permit": keptPermit, "read": keptRead, "handed": keptHanded} {
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

// A waiter that gives up while a master is not answering takes its queue
// member off that master too: the leave is parked, as a release is, and
// sent when the master answers again (docs/design.md §14.1 item 6).
func TestGiveUpDuringStallLeavesNoMember(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	resource := "stall-leave"
	key := handKey(resource)
	// Fenced: a waiter that may be handed the key leaves with its
	// give-back, a release; a fenced one sends a leave of its own.
	a := newLocker(t, c, &redlock.Options{Fencing: true})
	b := newLocker(t, c, &redlock.Options{Fencing: true, MasterTimeout: 100 * time.Millisecond})
	lkA, err := a.TryLock(ctx, resource)
	if err != nil {
		t.Fatal(err)
	}
	defer lkA.Unlock(ctx)
	bctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	got := lockAsync(bctx, b, resource)
	queued(t, c, key, 1)
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	// A command of B's left unanswered on master 0 makes B skip it.
	if lk, err := b.TryLock(ctx, resource+"-other"); err == nil {
		defer lk.Unlock(ctx)
	}
	waitFor(t, "B to skip master 0", func() bool { return b.Stats()[0].Skipped })
	giveUp()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("B's Lock: %v, want context.Canceled", r.err)
	}
	for i := 1; i < c.N(); i++ {
		if q := zrange(t, c, i, key); len(q) != 0 {
			t.Errorf("master %d: queue %q after B gave up", i, q)
		}
	}
	if d := b.Stats()[0].Deferred; d < 1 {
		t.Errorf("master 0: %d commands deferred after B gave up, want its leave", d)
	}
	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}
	// It runs the leave parked for it once it answers again (polled,
	// widely).
	if !poll(10*time.Second, func() bool { return len(zrange(t, c, 0, key)) == 0 }) {
		t.Errorf("master 0: queue %q 10 s after it answers again, want empty", zrange(t, c, 0, key))
	}
}

// Close while a waiter has been handed the key by every master but has
// not taken it (its wakes lost, its poll seconds away): Close ends the
// wait, the waiter's Lock fails with ErrClosed rather than hand out a
// lock, and it gives the keys back and leaves the queue before the
// connections close, so the resource is free at once.
func TestCloseGivesBackGrants(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	resource := "close-grants"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	lkA, got, m := bWaits(ctx, t, c, a, b, resource)
	token := grantToken(t, m)
	redlock.DropWakes(b)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every master to hand the key to B's grant token", everyKeyHolds(t, c, key, token))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != "" {
			t.Errorf("master %d: key %q after B's Close, want it given back", i, v)
		}
		if q := zrange(t, c, i, key); len(q) != 0 {
			t.Errorf("master %d: queue %q after B's Close", i, q)
		}
	}
	select {
	case r := <-got:
		if !errors.Is(r.err, redlock.ErrClosed) {
			t.Errorf("B's Lock: %v, %v; want ErrClosed", r.lk, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B's Lock did not return after Close")
	}
}

// Shutdown after Close only closes: it returns nil, as its doc says, even
// with locks still in the live set (which Close left until their TTL).
func TestShutdownAfterCloseOnlyCloses(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ctx := t.Context()
	l := newLocker(t, c, nil)
	if _, err := l.TryLock(ctx, "shutdown-after-close"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after Close: %v, want nil", err)
	}
}
