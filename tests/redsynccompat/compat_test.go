package redsynccompat_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ttl = 5 * time.Second

// newRedsync returns a Redsync over go-redis clients of its own, one per
// master, as a redsync fleet would have them.
func newRedsync(t *testing.T, c *lab.Masters) *redsync.Redsync {
	t.Helper()
	pools := make([]redsyncredis.Pool, c.N())
	for i, addr := range c.Addrs() {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { cl.Close() })
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		pools[i] = goredis.NewPool(cl)
	}
	return redsync.New(pools...)
}

// newLocker returns a Locker over the lab's clients. MasterTimeout is
// generous: this machine runs the tests under -race on two shared cores,
// and a healthy master descheduled for 50ms is not what they are about.
func newLocker(t *testing.T, c *lab.Masters, o redlock.Options) *redlock.Locker {
	t.Helper()
	for _, cl := range c.Clients() {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	o.TTL, o.MasterTimeout = ttl, 200*time.Millisecond
	l, err := redlock.New(c.Clients(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// valuesOf returns key's value on each master ("" when absent).
func valuesOf(t *testing.T, c *lab.Masters, key string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range c.N() {
		v, err := c.Client(i).Get(t.Context(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %q on master %d: %v", key, i, err)
		}
		out[i] = v
	}
	return out
}

func allEqual(vals []string, v string) bool {
	return !slices.ContainsFunc(vals, func(x string) bool { return x != v })
}

// onEveryMaster waits until key holds v on every master: TryLock returns
// once a majority said yes, and the other masters' SETs may still be on
// their way.
func onEveryMaster(t *testing.T, c *lab.Masters, key, v string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		vals := valuesOf(t, c, key)
		if allEqual(vals, v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q: %q, want %q on every master", key, vals, v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Redsync mutexes and Lockers with RedsyncKeys, on the same resource names
// and the same five masters, all at once: never two holders of a name.
func TestRedsyncAndLockerExcludeEachOther(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	rs := newRedsync(t, c)
	retry := redlock.RetryPolicy{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	ours := map[string]*redlock.Locker{
		"ours":            newLocker(t, c, redlock.Options{RedsyncKeys: true, Retry: retry}),
		"ours-via-client": newLocker(t, c, redlock.Options{RedsyncKeys: true, Retry: retry, ViaClient: true}),
		"ours-fenced":     newLocker(t, c, redlock.Options{RedsyncKeys: true, Retry: retry, Fencing: true}),
	}
	// A braced name and a leading '}': redsync takes any name as the key.
	resources := []string{"migrate:a", "{tenant:7}:b", "}c"}
	const redsyncWorkers, perWorker = 2, 70 // per resource: 5 workers × 70 × 3 resources = 1050 sections

	type state struct {
		holders   atomic.Int32
		lastFence atomic.Uint64
	}
	states := map[string]*state{}
	for _, r := range resources {
		states[r] = &state{}
	}
	var overlaps, redsyncSections, oursSections atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// section is the critical section: alone, and before the deadline.
	section := func(st *state, deadline time.Time) {
		if st.holders.Add(1) != 1 {
			overlaps.Add(1)
		}
		time.Sleep(100 * time.Microsecond)
		if !time.Now().Before(deadline) {
			report(errors.New("a holder passed its deadline inside the critical section"))
		}
		st.holders.Add(-1)
	}

	var wg sync.WaitGroup
	for _, r := range resources {
		st := states[r]
		for range redsyncWorkers {
			wg.Go(func() {
				for range perWorker {
					m := rs.NewMutex(r, redsync.WithExpiry(ttl), redsync.WithTries(64),
						redsync.WithRetryDelayFunc(func(int) time.Duration { return time.Millisecond + rand.N(4*time.Millisecond) }))
					for {
						err := m.LockContext(ctx)
						if err == nil {
							break
						}
						if ctx.Err() != nil {
							report(fmt.Errorf("redsync %q: %w", r, err))
							return
						}
					}
					section(st, m.Until())
					redsyncSections.Add(1)
					if ok, err := m.UnlockContext(ctx); !ok {
						report(fmt.Errorf("redsync unlock %q: %v", r, err))
						return
					}
				}
			})
		}
		for name, l := range ours {
			wg.Go(func() {
				for range perWorker {
					lk, err := l.Lock(ctx, r)
					if err != nil {
						report(fmt.Errorf("%s %q: %w", name, r, err))
						return
					}
					if f := lk.Fence(); f != 0 {
						// Fences order our fenced holders (redsync has none).
						if prev := st.lastFence.Load(); f <= prev {
							report(fmt.Errorf("%q: fence %d after %d", r, f, prev))
						}
						st.lastFence.Store(f)
					}
					section(st, lk.Deadline())
					oursSections.Add(1)
					if err := lk.Unlock(ctx); err != nil {
						report(fmt.Errorf("%s unlock %q: %w", name, r, err))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rsN, ourN := redsyncSections.Load(), oursSections.Load()
	t.Logf("%d critical sections (%d redsync, %d ours) on %d names, %d overlaps", rsN+ourN, rsN, ourN, len(resources), overlaps.Load())
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d critical sections overlapped another holder's", n)
	}
	if want := int64(len(resources) * redsyncWorkers * perWorker); rsN != want {
		t.Errorf("%d redsync sections, want %d", rsN, want)
	}
	if want := int64(len(resources) * len(ours) * perWorker); ourN != want {
		t.Errorf("%d of ours, want %d", ourN, want)
	}
	// Only redsync's names, and our fence counters beside them, were ever
	// written; every lock was released.
	for i := range c.N() {
		keys, err := c.Client(i).Keys(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !slices.Contains(resources, strings.TrimSuffix(k, ":fence")) || slices.Contains(resources, k) {
				t.Errorf("master %d: key %q left behind", i, k)
			}
		}
	}
}

// Without RedsyncKeys, a Locker and a redsync Mutex on the same name use
// different keys and both "hold" it; with it, the Locker is refused.
func TestWithoutRedsyncKeysTheyDoNotContend(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	rs := newRedsync(t, c)
	m := rs.NewMutex("orders:1", redsync.WithExpiry(ttl))
	if err := m.TryLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	def := newLocker(t, c, redlock.Options{})
	lk, err := def.TryLock(ctx, "orders:1")
	if err != nil {
		t.Fatalf("default naming: TryLock while redsync holds the name: %v; want success (different keys)", err)
	}
	if v := valuesOf(t, c, "orders:1"); !allEqual(v, m.Value()) {
		t.Errorf("redsync's key %q: %q, want redsync's value on every master", "orders:1", v)
	}
	onEveryMaster(t, c, "redlock:{orders:1}", lk.Token())
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	compat := newLocker(t, c, redlock.Options{RedsyncKeys: true})
	_, err = compat.TryLock(ctx, "orders:1")
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("RedsyncKeys: TryLock while redsync holds the name: %v; want ErrNotAcquired and ErrHeld", err)
	}
	if ok, err := m.UnlockContext(ctx); !ok {
		t.Fatal(err)
	}
}

// With RedsyncKeys the key is redsync's in both directions: each side is
// refused while the other holds it, our Extend and Unlock act on it, and
// neither side's release deletes the other's key.
func TestRedsyncKeysSharesTheKeyWithRedsync(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	rs := newRedsync(t, c)
	l := newLocker(t, c, redlock.Options{RedsyncKeys: true})

	lk, err := l.TryLock(ctx, "orders:2")
	if err != nil {
		t.Fatal(err)
	}
	onEveryMaster(t, c, "orders:2", lk.Token())
	m := rs.NewMutex("orders:2", redsync.WithExpiry(ttl))
	var taken *redsync.ErrTaken
	if err := m.TryLockContext(ctx); !errors.As(err, &taken) || len(taken.Nodes) != c.N() {
		t.Fatalf("redsync TryLock while we hold the name: %v; want ErrTaken on all %d", err, c.N())
	}
	// A redsync Mutex that holds nothing releases nothing of ours.
	if ok, _ := m.UnlockContext(ctx); ok {
		t.Fatal("redsync Unlock of a mutex it does not hold succeeded")
	}
	if err := lk.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	if ttls := pttls(t, c, "orders:2"); slices.ContainsFunc(ttls, func(d time.Duration) bool { return d <= ttl-time.Second }) {
		t.Fatalf("PTTL after Extend: %v", ttls)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := valuesOf(t, c, "orders:2"); !allEqual(v, "") {
		t.Fatalf("key %q after Unlock: %q", "orders:2", v)
	}

	if err := m.TryLockContext(ctx); err != nil {
		t.Fatalf("redsync TryLock after our Unlock: %v", err)
	}
	_, err = l.TryLock(ctx, "orders:2")
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("TryLock while redsync holds the name: %v; want ErrNotAcquired and ErrHeld", err)
	}
	// Our failed attempt released only its own token: redsync's is intact.
	if v := valuesOf(t, c, "orders:2"); !allEqual(v, m.Value()) {
		t.Fatalf("key %q after our failed TryLock: %q, want redsync's value", "orders:2", v)
	}
	if ok, err := m.ExtendContext(ctx); !ok {
		t.Fatalf("redsync Extend: %v", err)
	}
	if ok, err := m.UnlockContext(ctx); !ok {
		t.Fatalf("redsync Unlock: %v", err)
	}
	lk, err = l.TryLock(ctx, "orders:2")
	if err != nil {
		t.Fatalf("TryLock after redsync's Unlock: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func pttls(t *testing.T, c *lab.Masters, key string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, c.N())
	for i := range c.N() {
		d, err := c.Client(i).PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}
