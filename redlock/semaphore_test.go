package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/lab/labtest"
	"github.com/quorumlab/redlock/redlock"
)

// slotHolders returns, per slot of the semaphore name (1..k), how many of
// the given masters hold it for token.
func slotHolders(t *testing.T, c *lab.Masters, name string, k int, token string, masters ...int) []int {
	t.Helper()
	out := make([]int, k+1)
	for _, i := range masters {
		for j := 1; j <= k; j++ {
			v, err := c.Client(i).Get(t.Context(), fmt.Sprintf("redlock:{%s}:s:%d", name, j)).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("GET on master %d: %v", i, err)
			}
			if v == token {
				out[j]++
			}
		}
	}
	return out
}

func TestSemaphoreBadInput(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	for _, tc := range []struct {
		name    string
		permits int
	}{{"exports", 0}, {"exports", -1}, {"exports", redlock.MaxPermits + 1}, {"", 2}, {"}x", 2}} {
		if s, err := l.Semaphore(tc.name, tc.permits); !errors.Is(err, redlock.ErrInvalid) || s != nil {
			t.Errorf("Semaphore(%q, %d) = %v, %v; want nil, ErrInvalid", tc.name, tc.permits, s, err)
		}
	}
	if _, err := l.RWMutex(""); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("RWMutex(\"\") = %v; want ErrInvalid", err)
	}
	s, err := l.Semaphore("exports", 2)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 the nil context is the bad input under test
	if _, err := s.TryAcquire(nil); !errors.Is(err, redlock.ErrInvalid) { //nolint:staticcheck
		t.Errorf("TryAcquire(nil) = %v; want ErrInvalid", err)
	}
	if _, err := s.TryAcquire(t.Context(), redlock.WithTTL(-time.Second)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("TryAcquire(WithTTL(-1s)) = %v; want ErrInvalid", err)
	}
	for i := range c.N() {
		if n, _ := c.Client(i).DBSize(t.Context()).Result(); n != 0 {
			t.Errorf("master %d has %d keys after refused calls; want 0", i, n)
		}
	}
}

// The acceptance test: 12 goroutines over 3 Lockers contend for 3 permits
// for 3 s. No instant sees more than 3 holders before their deadlines, and
// some instant sees 3.
func TestSemaphoreBound(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const k = 3
	var sems []*redlock.Semaphore
	for range 3 {
		l := newLocker(t, c, &redlock.Options{TTL: 2 * time.Second})
		s, err := l.Semaphore("exports", k)
		if err != nil {
			t.Fatal(err)
		}
		sems = append(sems, s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	most, sections, errs := labtest.Sections(ctx, 12, 0, 2*time.Millisecond, func(ctx context.Context, g int) (*redlock.Lock, error) {
		return sems[g%3].Acquire(ctx)
	})
	for _, err := range errs {
		t.Error(err)
	}
	if most != k {
		t.Fatalf("most holders at once: %d; want exactly %d (never more, and the bound reached)", most, k)
	}
	t.Logf("%d sections", sections)
}

// With 2 of 5 masters SIGSTOPped, k = 2 still grants 2 permits and
// refuses a third; Holders counts 2; extend and unlock work; the freed
// permit is granted again.
func TestSemaphoreMinorityStalled(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	// MasterTimeout 1 s: the first round dials the three live masters
	// too, which a loaded machine can take well past 100 ms over.
	l := newColdLocker(t, c, &redlock.Options{TTL: 5 * time.Second, MasterTimeout: time.Second})
	s, err := l.Semaphore("exports", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("first permit: %v", err)
	}
	b, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("second permit: %v", err)
	}
	if a.Resource() != "exports" || a.Fence() != 0 {
		t.Errorf("Resource, Fence = %q, %d; want exports, 0", a.Resource(), a.Fence())
	}
	ha, hb := slotHolders(t, c, "exports", 2, a.Token(), 2, 3, 4), slotHolders(t, c, "exports", 2, b.Token(), 2, 3, 4)
	if !((ha[1] == 3 && hb[2] == 3) || (ha[2] == 3 && hb[1] == 3)) {
		t.Fatalf("slots on the live masters: first %v, second %v; want each on all 3, different slots", ha, hb)
	}
	_, err = s.TryAcquire(t.Context())
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("third permit: %v; want ErrNotAcquired and ErrHeld", err)
	}
	if n, err := s.Holders(t.Context()); err != nil || n != 2 {
		t.Fatalf("Holders = %d, %v; want 2", n, err)
	}
	before := a.Deadline()
	if err := a.Extend(t.Context()); err != nil || !a.Deadline().After(before) {
		t.Fatalf("Extend = %v (deadline %v -> %v)", err, before, a.Deadline())
	}
	if err := a.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	d, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("permit after a release: %v", err)
	}
	if err := errors.Join(b.Unlock(t.Context()), d.Unlock(t.Context())); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Holders(t.Context()); err != nil || n != 0 {
		t.Fatalf("Holders after unlocking = %d, %v; want 0", n, err)
	}
}

// Two callers naming different permits for one semaphore: the second is
// refused with ErrInvalid, and Acquire does not retry it.
func TestSemaphorePermitsMismatch(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	two, _ := l.Semaphore("exports", 2)
	three, _ := l.Semaphore("exports", 3)
	lk, err := two.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := three.TryAcquire(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TryAcquire with 3 permits after 2: %v; want ErrInvalid", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := three.Acquire(ctx); !errors.Is(err, redlock.ErrInvalid) || ctx.Err() != nil {
		t.Fatalf("Acquire with 3 permits after 2: %v (ctx %v); want ErrInvalid at once", err, ctx.Err())
	}
	for i := range c.N() {
		if v, _ := c.Client(i).Get(t.Context(), "redlock:{exports}:meta").Result(); v != "2" {
			t.Errorf("master %d records %q permits; want 2", i, v)
		}
		if n, _ := c.Client(i).Exists(t.Context(), "redlock:{exports}:s:3").Result(); n != 0 {
			t.Errorf("master %d: a third slot was taken", i)
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A permit never released expires on the masters (PX), and Acquire waiting
// for it gets it after the holder's deadline, not before.
func TestSemaphoreExpiresServerSide(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl = 600 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl})
	s, _ := l.Semaphore("exports", 1)
	lk, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	expiresWithin(t, c, "redlock:{exports}:s:1", ttl, lk)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	next, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Acquisition().Start.After(lk.Deadline()) {
		t.Fatalf("the next holder's round started at %v, before the first holder's deadline %v", next.Acquisition().Start, lk.Deadline())
	}
	if err := next.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Keep holds a permit and a read lock past several TTLs, the way it holds
// a mutex's lock: the slot and the reader's entry stay on the masters.
func TestKeepPermitAndReadLock(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl = 600 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl})
	s, _ := l.Semaphore("exports", 1)
	rw, _ := l.RWMutex("cache")
	p, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(p.Keep(), r.Keep()); err != nil {
		t.Fatal(err)
	}
	hp, hr := p, r
	start := time.Now()
	observe(start.Add(4*ttl), 20*time.Millisecond, func() bool {
		if err := errors.Join(hp.Err(), hr.Err()); err != nil {
			t.Fatalf("lost after %v: %v", time.Since(start), err)
		}
		return true
	})
	if _, err := s.TryAcquire(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("the kept permit was free after %v: %v", 4*ttl, err)
	}
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a writer got in beside the kept reader after %v: %v", 4*ttl, err)
	}
	if err := errors.Join(p.Unlock(t.Context()), r.Unlock(t.Context())); err != nil {
		t.Fatal(err)
	}
}

// expiresWithin fails the test unless key has a PTTL in (0, ttl] on every
// master: it expires on the masters' clocks, within the lock's TTL. A key
// already gone passes only if it was asked for after lk's deadline (a test
// delayed past it on a loaded machine); gone before that, or never
// expiring (PTTL −1), it fails.
func expiresWithin(t *testing.T, c *lab.Masters, key string, ttl time.Duration, lk *redlock.Lock) {
	t.Helper()
	for i := range c.N() {
		asked := time.Now()
		p, err := c.Client(i).PTTL(t.Context(), key).Result()
		switch {
		case err != nil || p == -time.Nanosecond || p == 0 || p > ttl:
			t.Fatalf("master %d: PTTL %s = %v, %v; want in (0, %v]", i, key, p, err, ttl)
		case p < 0 && asked.Before(lk.Deadline()):
			t.Fatalf("master %d: %s gone before the holder's deadline (%v before it)", i, key, lk.Deadline().Sub(asked))
		}
	}
}

// A waiting Acquire is woken by a permit's release: with a backoff longer
// than its context, it gets the permit only through the wake.
func TestSemaphoreAcquireWokenByRelease(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}})
	s, _ := l.Semaphore("exports", 1)
	held, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, s.Acquire)
	// The waiter's subscription must be up before the release, or the
	// release goes unheard.
	waitSubscribed(t, c, "redlock:{exports}:s:1")
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("Acquire: %v (a minute's backoff: only a wake gets it)", res.err)
	}
	if redlock.Wakes(l) == 0 {
		t.Fatal("no wake counted")
	}
	if err := res.lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// result is what a waiting call returned.
type result struct {
	lk  *redlock.Lock
	err error
}

// inBackground runs a waiting call (Acquire, Lock, RLock) in a goroutine
// with a 20 s context, ended with the test, and returns where its result
// goes.
func inBackground(t *testing.T, wait func(context.Context, ...redlock.LockOption) (*redlock.Lock, error)) <-chan result {
	t.Helper()
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	go func() {
		lk, err := wait(ctx)
		got <- result{lk, err}
	}()
	return got
}

// waitSubscribed waits until every master has a subscriber on channel: a
// waiter that would miss a release published before.
func waitSubscribed(t *testing.T, c *lab.Masters, channel string) {
	t.Helper()
	waitFor(t, "a subscription to "+channel+" on every master", func() bool {
		for i := range c.N() {
			n, err := c.Client(i).PubSubNumSub(t.Context(), channel).Result()
			if err != nil || n[channel] == 0 {
				return false
			}
		}
		return true
	})
}

// The permits record lives as long as a permit is held, no longer: it
// expires with the last permit (within a TTL), so that the semaphore can
// be used with another number of permits once nobody holds it, with no
// manual delete. While a permit is held, kept past several TTLs, the
// record stays, and another number of permits is refused.
func TestSemaphoreRecordExpires(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl = 600 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl})
	const meta = "redlock:{resize}:meta"
	two, _ := l.Semaphore("resize", 2)
	three, _ := l.Semaphore("resize", 3)
	p, err := two.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	expiresWithin(t, c, meta, ttl, p)
	if err := p.Keep(); err != nil {
		t.Fatal(err)
	}
	h := p
	start := time.Now()
	observe(start.Add(3*ttl), 20*time.Millisecond, func() bool {
		if err := h.Err(); err != nil {
			t.Fatalf("the permit was lost: %v", err)
		}
		for i := range c.N() {
			if v, err := c.Client(i).Get(t.Context(), meta).Result(); err != nil || v != "2" {
				t.Fatalf("master %d, %v after the permit was kept: record %q, %v; want \"2\" while a permit is held", i, time.Since(start), v, err)
			}
		}
		return true
	})
	if _, err := three.TryAcquire(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("3 permits while one of 2 is held: %v; want ErrInvalid", err)
	}
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, 5*time.Second, func() error {
		for i := range c.N() {
			if n, err := c.Client(i).Exists(t.Context(), meta).Result(); err != nil || n != 0 {
				return fmt.Errorf("master %d still has the permits record (%v)", i, err)
			}
		}
		return nil
	})
	q, err := three.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("3 permits once nobody holds the semaphore: %v", err)
	}
	q.Unlock(t.Context())
}

// A semaphore takes up to MaxPermits, at least 1 024 permits: a round
// takes a free slot among them, and Holders counts them.
func TestSemaphoreManyPermits(t *testing.T) {
	if redlock.MaxPermits < 1024 {
		t.Fatalf("MaxPermits = %d; want at least 1024", redlock.MaxPermits)
	}
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	s, err := l.Semaphore("wide", redlock.MaxPermits)
	if err != nil {
		t.Fatal(err)
	}
	var held []*redlock.Lock
	for range 40 { // past 32, the old cap of a Lua number's bit mask
		lk, err := s.TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	if n, err := s.Holders(t.Context()); err != nil || n != 40 {
		t.Fatalf("Holders = %d, %v; want 40", n, err)
	}
	for _, lk := range held {
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Holders(t.Context()); err != nil || n != 0 {
		t.Fatalf("Holders after Unlock = %d, %v; want 0", n, err)
	}
}
