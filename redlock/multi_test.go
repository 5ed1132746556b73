package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// Two callers lock {a,b} and {b,a} over and over, two more a and b alone:
// all make progress (no deadlock), and no resource ever has two holders.
func TestLockAllOverlappingSetsInOppositeOrders(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	opts := &redlock.Options{TTL: 2 * time.Second, Retry: redlock.RetryPolicy{MinDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}}
	lockers := []*redlock.Locker{newLocker(t, c, opts), newLocker(t, c, opts), newLocker(t, c, opts), newLocker(t, c, opts)}
	sets := [][]string{{"a", "b"}, {"b", "a"}, {"a"}, {"b"}}
	holders := map[string]*atomic.Int32{"a": {}, "b": {}}
	var violations atomic.Int32
	const rounds = 30
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := make([]int, len(sets))
	var wg sync.WaitGroup
	for w := range sets {
		wg.Go(func() {
			for done[w] < rounds && ctx.Err() == nil {
				lk, err := lockers[w].LockAll(ctx, sets[w])
				if err != nil {
					continue
				}
				for _, r := range sets[w] {
					if holders[r].Add(1) != 1 {
						violations.Add(1)
					}
				}
				time.Sleep(time.Millisecond) // hold it a moment
				for _, r := range sets[w] {
					holders[r].Add(-1)
				}
				if err := lk.Unlock(context.WithoutCancel(ctx)); err != nil {
					t.Errorf("caller %d: Unlock: %v", w, err)
				}
				done[w]++
			}
		})
	}
	wg.Wait()
	if v := violations.Load(); v > 0 {
		t.Fatalf("%d times a resource had two holders", v)
	}
	for w, n := range done {
		if n < rounds {
			t.Errorf("caller %d (%v) made %d of %d acquisitions in 60s", w, sets[w], n, rounds)
		}
	}
	for _, r := range []string{"a", "b"} {
		noKeyOn(t, c, r, 0, 1, 2, 3, 4)
	}
}

// A failed multi-lock leaves no key of its own on any master: neither
// where the whole set was refused, nor where the master granted it.
func TestTryLockAllFailureLeavesNoKey(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	ctx := t.Context()
	// Another owner holds b on masters 0 and 1 and c on master 4: only
	// masters 2 and 3 can grant {a,b,c}, short of a majority.
	for _, i := range []int{0, 1} {
		c.Client(i).Set(ctx, "redlock:{b}", "other", 10*time.Second)
	}
	c.Client(4).Set(ctx, "redlock:{c}", "other", 10*time.Second)
	lk, err := l.TryLockAll(ctx, []string{"c", "a", "b"})
	if !errors.Is(err, redlock.ErrNotAcquired) || lk != nil {
		t.Fatalf("TryLockAll: %v, %v; want ErrNotAcquired", lk, err)
	}
	var e *redlock.Error
	if !errors.As(err, &e) || e.Count(quorum.Refused) != 3 {
		t.Fatalf("want 3 masters refusing, got %v", err)
	}
	want := map[string][]string{
		"a": {"", "", "", "", ""},
		"b": {"other", "other", "", "", ""},
		"c": {"", "", "", "", "other"},
	}
	for r, w := range want {
		if got := keyState(t, c, r); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s after the failed TryLockAll: %q, want %q", r, got, w)
		}
	}
	// And with the set free, it locks all three, extends and unlocks them.
	for _, i := range []int{0, 1} {
		c.Client(i).Del(ctx, "redlock:{b}")
	}
	c.Client(4).Del(ctx, "redlock:{c}")
	lk, err = l.TryLockAll(ctx, []string{"c", "a", "b"}, redlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := lk.Resources(); fmt.Sprint(got) != "[a b c]" || lk.Resource() != "a" {
		t.Errorf("Resources() = %v, Resource() = %q", got, lk.Resource())
	}
	// The round returned at a majority: every master gets the set soon.
	waitFor(t, "{a,b,c} on all 5 masters", func() bool {
		for _, r := range []string{"a", "b", "c"} {
			if countValue(keyState(t, c, r), lk.Token()) != 5 {
				return false
			}
		}
		return true
	})
	// Another owner's single lock on b is refused while the set is held.
	if _, err := l.TryLock(ctx, "b"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Errorf("TryLock(b) while {a,b,c} is held: %v", err)
	}
	if err := lk.Extend(ctx, redlock.WithTTL(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every key of the set extended to 6s on every master", func() bool {
		for _, r := range []string{"a", "b", "c"} {
			for _, d := range pttls(t, c, r) {
				if d <= 5*time.Second {
					return false
				}
			}
		}
		return true
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b", "c"} {
		noKeyOn(t, c, r, 0, 1, 2, 3, 4)
	}
}

// The fence of a set is larger than every earlier fence of each of its
// resources, and is written back to every counter of the set.
func TestLockAllFence(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	ctx := t.Context()
	for i := range 3 {
		c.Client(i).HSet(ctx, "redlock:{a}:fence", "fence", "5")
		c.Client(i).HSet(ctx, "redlock:{b}:fence", "fence", "9")
	}
	lk, err := l.TryLockAll(ctx, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Fence() != 10 {
		t.Fatalf("fence of {a,b} = %d, want 10 (one more than b's 9)", lk.Fence())
	}
	// The write-back round returned at a majority: wait for the third.
	waitFor(t, "both counters at 10 on every master", func() bool {
		for i := range 3 {
			for _, r := range []string{"a", "b"} {
				if v, err := c.Client(i).HGet(ctx, "redlock:{"+r+"}:fence", "fence").Result(); err != nil || v != "10" {
					return false
				}
			}
		}
		return true
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	one, err := l.TryLock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Unlock(ctx)
	if one.Fence() != 11 {
		t.Fatalf("a's next fence = %d, want 11", one.Fence())
	}
}

func TestLockAllBadInput(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	many := make([]string, redlock.MaxResources+1)
	for i := range many {
		many[i] = "r" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name      string
		resources []string
		rule      string
	}{
		{"none", nil, "no resources"},
		{"twice", []string{"a", "b", "a"}, `"a" is listed twice`},
		{"too many", many, "over the limit"},
		{"a bad name", []string{"a", ""}, "empty"},
	} {
		for name, f := range map[string]func() (*redlock.Lock, error){
			"TryLockAll": func() (*redlock.Lock, error) { return l.TryLockAll(t.Context(), tc.resources) },
			"LockAll":    func() (*redlock.Lock, error) { return l.LockAll(t.Context(), tc.resources) },
		} {
			if lk, err := f(); !errors.Is(err, redlock.ErrInvalid) || lk != nil || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("%s %s: %v, %v; want ErrInvalid naming %q", name, tc.name, lk, err, tc.rule)
			}
		}
	}
}

// A Lock of one resource does not queue behind a LockAll that waits for
// another resource of its set: with a free and b held, Lock(a) acquires
// while LockAll({a,b}) waits.
func TestLockDoesNotWaitBehindAnotherSet(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	holder := newLocker(t, c, nil)
	l := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}})
	b, err := holder.TryLock(t.Context(), "set-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	all := make(chan error, 1)
	go func() {
		_, err := l.LockAll(ctx, []string{"set-a", "set-b"})
		all <- err
	}()
	waitFor(t, "LockAll to wait", func() bool {
		n, err := c.Client(0).PubSubNumSub(t.Context(), "redlock:{set-b}").Result()
		return err == nil && n["redlock:{set-b}"] > 0
	})
	start := time.Now()
	a, err := l.Lock(t.Context(), "set-a")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Lock(set-a) took %v: it waited behind LockAll({set-a, set-b})", d)
	}
	a.Unlock(t.Context())
	cancel()
	if err := <-all; !errors.Is(err, context.Canceled) {
		t.Errorf("LockAll after cancel: %v", err)
	}
}
