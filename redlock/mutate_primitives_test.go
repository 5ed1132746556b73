package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The semaphore's and read-write lock's arguments and key layout, in
// memory (semaphore.go's and rwmutex.go's checks lived mutated against
// the simulator, whose processes all name their keys alike): permits from
// 1 to maxPermits, slots named 1 to k, a nil context refused, the writer's
// key ":w" and the readers' ":r" (docs/design.md §18, §19).
func TestMutatePrimitiveArguments(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, nil)
	for _, permits := range []int{-1, 0, maxPermits + 1} {
		if _, err := l.Semaphore("s", permits); !errors.Is(err, ErrInvalid) {
			t.Errorf("Semaphore with %d permits: %v, want ErrInvalid", permits, err)
		}
	}
	for _, permits := range []int{1, maxPermits} {
		s, err := l.Semaphore("s", permits)
		if err != nil {
			t.Fatalf("Semaphore with %d permits: %v", permits, err)
		}
		for i, slot := range s.slots {
			if want := l.opts.keyFor("s") + slotInfix + strconv.Itoa(i+1); slot != want {
				t.Fatalf("slot %d of %d is %q, want %q", i, permits, slot, want)
			}
		}
	}
	s, err := l.Semaphore("s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(nil); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("TryAcquire(nil): %v, want ErrInvalid", err)
	}
	lk, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"", "a\x00b"} {
		if _, err := l.RWMutex(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("RWMutex(%q): %v, want ErrInvalid", name, err)
		}
		if _, err := l.Semaphore(name, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("Semaphore(%q, 1): %v, want ErrInvalid", name, err)
		}
	}
	rw, err := l.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	w, err := rw.TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	flush(l) // the round returned at its decision: master 0 may not have run it yet
	if want := l.opts.keyFor("rw") + ":w"; w.key != want || ms[0].run("EXISTS", want).Int != 1 {
		t.Errorf("a writer holds %q (on master 0: %v), want %q", w.key, ms[0].run("EXISTS", want).Int, want)
	}
	if err := w.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := l.opts.keyFor("rw") + ":r"; r.key != want {
		t.Errorf("a reader's lock is on %q, want %q", r.key, want)
	}
	if err := r.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A semaphore's Acquire with Retry.MaxAttempts makes exactly that many
// rounds on a semaphore whose permits are held, and says so
// (semaphore.go's attempt count and its limit lived mutated).
func TestMutateSemaphoreMaxAttempts(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{Retry: RetryPolicy{MaxAttempts: 3}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	acquire := sha(t, "sem_acquire.lua")
	var mu sync.Mutex
	rounds := 0
	ms[0].refuseWith("", func(args []string) bool {
		if isScript(args, acquire) {
			mu.Lock()
			if rounds++; rounds > 10 {
				cancel() // a count that never reaches the limit ends here
			}
			mu.Unlock()
		}
		return false
	})
	s, err := l.Semaphore("s", 1)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	mu.Lock()
	rounds = 0
	mu.Unlock()
	_, err = s.Acquire(ctx)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Errorf("Acquire of a held permit with MaxAttempts 3: %v, want it to give up after 3 attempts", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if rounds != 3 {
		t.Errorf("Acquire made %d rounds, want 3", rounds)
	}
}

// Holders counts the slots a majority holds, with a majority answering,
// and refuses a nil context and a reading fewer than a majority answered
// (semaphore.go's Holders conditions lived mutated).
func TestMutateSemaphoreHolders(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, nil)
	s, err := l.Semaphore("h", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Holders(nil); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Holders(nil): %v, want ErrInvalid", err)
	}
	lk, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	holders := sha(t, "sem_holders.lua")
	refuse := func(args []string) bool { return isScript(args, holders) }
	for refusing := range 3 {
		for i, m := range ms {
			if i < refusing {
				m.refuseWith("", refuse)
			} else {
				m.refuseWith("", nil)
			}
		}
		n, err := s.Holders(t.Context())
		switch {
		case refusing < 2 && (err != nil || n != 1):
			t.Errorf("Holders with %d of 3 masters refusing: %d, %v; want 1 permit held", refusing, n, err)
		case refusing == 2 && !errors.Is(err, ErrNotAcquired):
			t.Errorf("Holders with 2 of 3 masters refusing: %d, %v; want ErrNotAcquired", n, err)
		}
	}
}

// A semaphore's round: the slot a majority took for the caller wins, the
// last slot of its order as well as the first; the other slots masters
// took for it are given back on those masters only; an acquisition with
// no validity left fails; and when giving back the others outlasts the
// validity, the won slot is given back too (docs/design.md §18).
func TestMutateSemaphoreSlots(t *testing.T) {
	// The in-memory env draws the largest rotation: with 2 permits the
	// caller's order is slot 2, then slot 1.
	setup := func(t *testing.T) (*Locker, []*simDriver, *memClock, *Semaphore) {
		l, ms, clk := simDriverLocker(t, 3, &Options{TTL: time.Second})
		s, err := l.Semaphore("s", 2)
		if err != nil {
			t.Fatal(err)
		}
		return l, ms, clk, s
	}
	t.Run("last slot of the order", func(t *testing.T) {
		_, ms, _, s := setup(t)
		for _, m := range ms {
			m.run("SET", s.slots[1], "other", "PX", "10000")
		}
		lk, err := s.TryAcquire(t.Context())
		if err != nil || lk.key != s.slots[0] {
			t.Fatalf("TryAcquire with its first slot held everywhere: %v, %v; want its second, %s", lk, err, s.slots[0])
		}
	})
	t.Run("other slots given back where taken", func(t *testing.T) {
		l, ms, _, s := setup(t)
		ms[2].run("SET", s.slots[1], "other", "PX", "10000") // master 2 takes slot 1 instead
		log := spy(ms)
		lk, err := s.TryAcquire(t.Context())
		if err != nil || lk.key != s.slots[1] {
			t.Fatalf("TryAcquire: %v, %v; want slot 2, taken by masters 0 and 1", lk, err)
		}
		flush(l)
		releaseMulti := sha(t, "release_multi.lua")
		for i, m := range ms {
			want := 0
			if i == 2 {
				want = 1
			}
			if n := log.count(i, func(a []string) bool { return isScript(a, releaseMulti) }); n != want {
				t.Errorf("master %d was sent %d give-backs of the other slots, want %d", i, n, want)
			}
			if got := m.run("GET", s.slots[0]).Text; got != "" {
				t.Errorf("master %d still holds slot 1 for %q", i, got)
			}
		}
	})
	t.Run("no validity left", func(t *testing.T) {
		l, ms, clk, s := setup(t)
		acquire := sha(t, "sem_acquire.lua")
		var once sync.Once // the first master to run the round: before its decision
		for _, m := range ms {
			m.refuseWith("", func(a []string) bool {
				if isScript(a, acquire) {
					once.Do(func() { clk.pass(l.opts.budget().Window()) }) // the round takes the whole window
				}
				return false
			})
		}
		if lk, err := s.TryAcquire(t.Context()); err == nil {
			t.Errorf("an acquisition with no validity left succeeded: %v", lk.Acquisition().Validity)
		}
	})
	t.Run("give-back past the deadline", func(t *testing.T) {
		l, ms, clk, s := setup(t)
		ms[2].run("SET", s.slots[1], "other", "PX", "10000")
		releaseMulti := sha(t, "release_multi.lua")
		ms[2].refuseWith("", func(a []string) bool {
			if isScript(a, releaseMulti) {
				clk.pass(l.opts.budget().Window()) // giving back the others outlasts the validity
			}
			return false
		})
		if lk, err := s.TryAcquire(t.Context()); err == nil {
			t.Fatalf("an acquisition whose give-back outlasted its validity succeeded: %v", lk.key)
		}
		flush(l)
		for i, m := range ms[:2] {
			if got := m.run("GET", s.slots[1]).Text; got != "" {
				t.Errorf("master %d still holds the won slot 2 for %q after the late give-back", i, got)
			}
		}
	})
}

// A semaphore's Acquire whose round found the permits held registers as a
// waiter, so that a release wakes it (docs/design.md §18.2).
func TestMutateSemaphoreWaiterRegisters(t *testing.T) {
	asleep := new(atomic.Int64)
	l, ms, _ := simDriverLockerWith(t, 3, nil, func(c *memClock) env { return gateEnv{memEnv{clk: c}, asleep} })
	s, err := l.Semaphore("w", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.run("SET", s.slots[0], "other", "PX", "100000")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Acquire(ctx)
	}()
	eventually(t, "the Acquire asleep", func() bool { return asleep.Load() >= 1 })
	n := l.wake.waiting.Load()
	cancel()
	<-done
	if n != 1 {
		t.Errorf("an Acquire refused by held permits waits with %d waiters registered, want 1 (a release wakes it)", n)
	}
}
