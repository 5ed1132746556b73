package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/lab/labtest"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newLocker builds a Locker over the cluster with default go-redis clients.
// Its cleanup resumes paused masters first, so that Close does not wait for
// calls stuck on them for go-redis's ReadTimeout.
func newLocker(t *testing.T, c *lab.Masters, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	clients := c.Clients()
	// Dial now: a cold client's first call also handshakes, which on a
	// loaded machine can overrun a tight MasterTimeout and fail a round the
	// test did not mean to fail.
	for _, cl := range clients {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A generous MasterTimeout where the test does not set one: a user's CI
	// is a loaded machine, and a round that fails because a healthy master
	// was descheduled for 50ms is not what these tests are about: 200 ms,
	// or a quarter of a shorter TTL (the default would be 10 ms there).
	// Tests of stalls set their own.
	o := redlock.Options{MasterTimeout: 200 * time.Millisecond}
	if opts != nil {
		o = *opts
		if o.MasterTimeout == 0 {
			o.MasterTimeout = 200 * time.Millisecond
			if o.TTL > 0 {
				o.MasterTimeout = min(o.MasterTimeout, o.TTL/4)
			}
		}
	}
	l, err := redlock.New(clients, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	// The Locker's own connections (the fast path dials its own, not the
	// clients' pools): the test's first round must not race them.
	redlock.WarmUp(l)
	return l
}

// newColdLocker is newLocker without dialling first: for a test whose
// masters stall before the Locker's first contact with them, which is
// the case it tests.
func newColdLocker(t *testing.T, c *lab.Masters, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(c.Clients(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	return l
}

// keyState returns, per master, the lock key's value ("" when absent).
func keyState(t *testing.T, c *lab.Masters, resource string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range c.N() {
		v, err := c.Client(i).Get(t.Context(), "redlock:{"+resource+"}").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET on master %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

// noKeyOn fails the test if any of the given masters (only those: others
// may be paused) holds the lock key.
func noKeyOn(t *testing.T, c *lab.Masters, resource string, masters ...int) {
	t.Helper()
	for _, i := range masters {
		n, err := c.Client(i).Exists(t.Context(), "redlock:{"+resource+"}").Result()
		if err != nil || n != 0 {
			t.Fatalf("master %d: EXISTS %q = %d, %v; want 0", i, resource, n, err)
		}
	}
}

// waitGone waits until no master holds the lock key.
func waitGone(t *testing.T, c *lab.Masters, resource, what string) {
	t.Helper()
	waitFor(t, what, func() bool { return countValue(keyState(t, c, resource), "") == c.N() })
}

func countValue(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// waitFor fails t unless cond comes to hold within 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, what, 10*time.Second, cond)
}

// waitWithin fails t unless cond comes to hold within d.
func waitWithin(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("timed out (%v) waiting for %s", d, what)
	}
}

// observe calls check every pace until end, or until check returns
// false: a test watching a state over a span of time (a lock kept
// through several TTLs), where the span is the point. It is the one
// pace of such observations in this package's tests.
func observe(end time.Time, pace time.Duration, check func() bool) {
	for time.Now().Before(end) && check() {
		time.Sleep(pace)
	}
}

// poll reports whether cond comes to hold within d, checked every 2 ms:
// the one wait of this package's tests on real masters for a state
// (waitFor, waitWithin, settles, ...).
func poll(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

func TestAcquireReleaseOnFiveMasters(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := keyState(t, c, "orders"); countValue(got, lk.Token()) < 3 {
		t.Fatalf("token on %d of 5 masters right after the acquire, want a majority", countValue(got, lk.Token()))
	}
	// TryLock returns at the majority; the other SETs land just after.
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "orders"), lk.Token()) == 5 })
	a := lk.Acquisition()
	if a.Validity != a.TTL-a.Elapsed-a.Drift-a.SafetyMargin || a.Drift != 102*time.Millisecond || a.TTL != 10*time.Second {
		t.Fatalf("breakdown does not add up: %+v", a)
	}
	if d := lk.Deadline().Sub(a.Start); d != 10*time.Second-102*time.Millisecond {
		t.Fatalf("deadline − start = %v, want 9.898s", d)
	}
	if len(lk.Token()) < 22 {
		t.Fatalf("token %q shorter than 128 bits", lk.Token())
	}
	// Contended: a second Locker cannot take it.
	l2 := newLocker(t, c, nil)
	if _, err := l2.TryLock(t.Context(), "orders"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	if got := keyState(t, c, "orders"); countValue(got, lk.Token()) != 5 {
		t.Fatalf("the failed attempt disturbed the holder's keys: %q", got)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := keyState(t, c, "orders"); countValue(got, "") != 5 {
		t.Fatalf("keys left after Unlock: %q", got)
	}
	if err := lk.Unlock(t.Context()); !errors.Is(err, redlock.ErrUnlocked) || errors.Is(err, redlock.ErrLost) {
		t.Fatalf("second Unlock: %v, want ErrUnlocked, not ErrLost", err)
	}
}

// Two of five masters SIGSTOPped, default go-redis clients: TryLock and
// Unlock still succeed, each within 10× MasterTimeout.
func TestTwoStalledMastersDoNotSlowAcquireOrUnlock(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{MasterTimeout: 100 * time.Millisecond})
	nt := l.Options().MasterTimeout
	for _, i := range []int{1, 3} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 { // the first round meets the stall; later ones meet open breakers
		start := time.Now()
		lk, err := l.TryLock(t.Context(), "stall")
		if err != nil {
			t.Fatalf("round %d: TryLock with 2 of 5 stalled: %v", round, err)
		}
		if took := time.Since(start); took > 10*nt {
			t.Fatalf("round %d: TryLock took %v, over 10× MasterTimeout (%v)", round, took, nt)
		}
		start = time.Now()
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		if took := time.Since(start); took > 10*nt {
			t.Fatalf("round %d: Unlock took %v, over 10× MasterTimeout (%v)", round, took, nt)
		}
		noKeyOn(t, c, "stall", 0, 2, 4)
	}
}

// Three of five SIGSTOPped: TryLock fails with the three timed out, leaves
// no key on the two that answered, and none on the three once they wake.
func TestThreeStalledMastersFailAndRelease(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{MasterTimeout: 100 * time.Millisecond})
	for _, i := range []int{0, 2, 4} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryLock(t.Context(), "minority")
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 3 of 5 stalled: %v, want ErrNotAcquired", err)
	}
	var e *redlock.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *redlock.Error", err)
	}
	if e.Count(quorum.OK) != 2 || e.Count(quorum.TimedOut) != 3 {
		t.Fatalf("outcomes: %d ok, %d timed out, want 2 and 3 (%v)", e.Count(quorum.OK), e.Count(quorum.TimedOut), err)
	}
	for _, i := range []int{0, 2, 4} {
		if e.Masters[i].Outcome != quorum.TimedOut {
			t.Errorf("master %d: %v, want timed out", i, e.Masters[i].Outcome)
		}
	}
	noKeyOn(t, c, "minority", 1, 3)
	// When the stalled masters wake, the SETs queued in their sockets land;
	// the Locker deletes them as their late replies arrive.
	c.ResumeAll()
	waitGone(t, c, "minority", "late-landed keys to be released")
}

// A majority that arrives after the validity window is not a lock.
func TestLateMajorityIsNotALock(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{TTL: time.Second, SafetyMargin: 300 * time.Millisecond, MasterTimeout: 950 * time.Millisecond})
	// drift = 1s×0.01 + 2ms = 12ms: the window is 1000 − 12 − 300 = 688ms.
	// Three masters answer nothing for 800ms: later than the window,
	// sooner than MasterTimeout (with room for a loaded CI machine), so the
	// majority does arrive, too late. (CLIENT PAUSE rather than DEBUG
	// SLEEP: it is in effect when the command returns, so the test does
	// not race the stall.)
	var wg sync.WaitGroup
	for _, i := range []int{0, 1, 2} {
		wg.Go(func() {
			if err := c.Slow(t.Context(), i, 800*time.Millisecond); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	_, err := l.TryLock(t.Context(), "late")
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	var e *redlock.Error
	if !errors.As(err, &e) || e.Count(quorum.OK) < 3 || !strings.Contains(e.Reason, "validity window") {
		t.Fatalf("want a majority of OKs rejected for lateness, got %v", err)
	}
	if got := keyState(t, c, "late"); countValue(got, "") != 5 {
		t.Fatalf("keys left after the late majority: %q", got)
	}
}

// Mutual exclusion under contention.
func TestMutualExclusion(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const lockers, perLocker = 8, 25
	var ls []*redlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, c, nil))
	}
	most, sections, errs := labtest.Sections(t.Context(), lockers, perLocker, 0, func(ctx context.Context, w int) (*redlock.Lock, error) {
		return ls[w].Lock(ctx, "mutex")
	})
	for _, err := range errs {
		t.Error(err)
	}
	if most != 1 {
		t.Fatalf("at most %d holders at once, want exactly 1", most)
	}
	if sections != lockers*perLocker {
		t.Fatalf("%d critical sections, want %d", sections, lockers*perLocker)
	}
}

// Extend moves the deadline and raises the key's TTL on a majority of
// masters.
func TestExtend(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{TTL: time.Second, MasterTimeout: 40 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "ext")
	if err != nil {
		t.Fatal(err)
	}
	before := lk.Deadline()
	waitFor(t, "PTTL to fall below 800ms", func() bool {
		return c.Client(0).PTTL(t.Context(), "redlock:{ext}").Val() < 800*time.Millisecond
	})
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !lk.Deadline().After(before) {
		t.Fatalf("Extend did not move the deadline: %v → %v", before, lk.Deadline())
	}
	raised := 0
	for i := range 5 {
		if c.Client(i).PTTL(t.Context(), "redlock:{ext}").Val() > 850*time.Millisecond {
			raised++
		}
	}
	if raised < 3 {
		t.Fatalf("PTTL raised on %d masters, want a majority", raised)
	}
}

func TestExtendAfterDeadlineIsLost(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{TTL: 100 * time.Millisecond, MasterTimeout: 40 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "lapsed")
	if err != nil {
		t.Fatal(err)
	}
	// Past the deadline but (the drift allowance) before the keys expire:
	// Extend must not touch them.
	waitFor(t, "the deadline", func() bool { return !lk.Valid() })
	if err := lk.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Extend after the deadline: %v, want ErrLost", err)
	}
	waitGone(t, c, "lapsed", "the keys to expire")
	if err := lk.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Extend after expiry: %v, want ErrLost", err)
	}
	if got := keyState(t, c, "lapsed"); countValue(got, "") != 5 {
		t.Fatalf("Extend re-created keys: %q", got)
	}
}

func TestUnlockNeverDeletesTheNextOwnersKeys(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	la := newLocker(t, c, &redlock.Options{TTL: 100 * time.Millisecond, MasterTimeout: 40 * time.Millisecond})
	lb := newLocker(t, c, nil)
	a, err := la.TryLock(t.Context(), "handoff")
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, "handoff", "A's keys to expire")
	b, err := lb.TryLock(t.Context(), "handoff")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's token on all 5 masters", func() bool { return countValue(keyState(t, c, "handoff"), b.Token()) == 5 })
	if err := a.Unlock(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("stale Unlock: %v, want ErrLost", err)
	}
	if got := keyState(t, c, "handoff"); countValue(got, b.Token()) != 5 {
		t.Fatalf("B's keys after A's stale Unlock: %q", got)
	}
	if err := b.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Unlock must release even when the caller's ctx is already cancelled.
func TestUnlockWithCancelledContext(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(t.Context(), "cancelled")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a cancelled ctx: %v", err)
	}
	if got := keyState(t, c, "cancelled"); countValue(got, "") != 3 {
		t.Fatalf("keys left: %q", got)
	}
}

// Lock returns promptly when its context is cancelled while it waits for a
// held lock, wrapping both context.Canceled and ErrNotAcquired, and leaves
// neither the holder's keys disturbed nor its own behind.
func TestLockReturnsPromptlyWhenCancelled(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	held, err := l.TryLock(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var cancelledAt atomic.Int64
	time.AfterFunc(50*time.Millisecond, func() { cancelledAt.Store(time.Now().UnixNano()); cancel() })
	_, err = l.Lock(ctx, "busy")
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Errorf("Lock: %v should also say it was not acquired", err)
	}
	if lag := returned.Sub(time.Unix(0, cancelledAt.Load())); lag > time.Second {
		t.Fatalf("Lock returned %v after the cancel", lag)
	}
	// The holder has a majority (a contender's SET may have beaten one of
	// its late SETs to a master), and the contender left nothing behind.
	if got := keyState(t, c, "busy"); countValue(got, held.Token()) < 3 || countValue(got, held.Token())+countValue(got, "") != 5 {
		t.Fatalf("holder's keys disturbed or contender's left behind: %q", got)
	}
	if _, err := l.Lock(ctx, "busy"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a dead ctx: %v", err)
	}
}

// Bad input is an error naming the rule, never a panic.
func TestBadInput(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	good := c.Clients()
	var nilClient *redis.Client
	sameAddr := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	t.Cleanup(func() { sameAddr.Close() })
	for _, tc := range []struct {
		name    string
		masters []redis.UniversalClient
		opts    *redlock.Options
		rule    string
	}{
		{"no masters", nil, nil, "no masters"},
		{"nil client", []redis.UniversalClient{good[0], nil, good[2]}, nil, "master 1 is a nil client"},
		{"typed nil client", []redis.UniversalClient{good[0], nilClient}, nil, "master 1 is a nil client"},
		{"same address twice", []redis.UniversalClient{good[0], good[1], sameAddr}, nil, "masters 0 and 2 are the same master"},
		{"same client twice", []redis.UniversalClient{good[0], good[0]}, nil, "masters 0 and 1 are the same master"},
		{"negative TTL", good, &redlock.Options{TTL: -time.Second}, "TTL -1s must be positive"},
		{"TTL within drift and margin", good, &redlock.Options{TTL: 100 * time.Millisecond, SafetyMargin: 99 * time.Millisecond}, "must exceed drift"},
		{"DriftFactor 1", good, &redlock.Options{DriftFactor: 1}, "DriftFactor 1 must be in [0, 1)"},
		{"DriftFactor negative", good, &redlock.Options{DriftFactor: -0.5}, "DriftFactor -0.5 must be in [0, 1)"},
		{"MasterTimeout equal to TTL", good, &redlock.Options{TTL: time.Second, MasterTimeout: time.Second}, "MasterTimeout 1s must be shorter than TTL 1s"},
		{"sub-millisecond TTL", good, &redlock.Options{TTL: 1500*time.Millisecond + 500*time.Microsecond}, "whole number of milliseconds"},
		{"prefix with a brace", good, &redlock.Options{KeyPrefix: "a{b"}, "must not contain '{' or '}'"},
		{"negative retry", good, &redlock.Options{Retry: redlock.RetryPolicy{MaxAttempts: -1}}, "MaxAttempts -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.New(tc.masters, tc.opts)
			if err == nil {
				l.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("New: %v, want ErrInvalid naming %q", err, tc.rule)
			}
		})
	}
	l := newLocker(t, c, nil)
	for _, tc := range []struct{ name, resource, rule string }{
		{"empty resource", "", "resource name is empty"},
		{"long resource", strings.Repeat("r", 513), "513 bytes, over the 512-byte limit"},
		{"control character", "a\nb", "control character at byte 1"},
		{"leading brace", "}x", "must not start with '}'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, f := range map[string]func(context.Context, string) (*redlock.Lock, error){
				"TryLock": func(ctx context.Context, r string) (*redlock.Lock, error) { return l.TryLock(ctx, r) },
				"Lock":    func(ctx context.Context, r string) (*redlock.Lock, error) { return l.Lock(ctx, r) },
				"TryLockAll": func(ctx context.Context, r string) (*redlock.Lock, error) {
					return l.TryLockAll(ctx, []string{"ok", r})
				},
			} {
				if _, err := f(t.Context(), tc.resource); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tc.rule) {
					t.Fatalf("%s: %v, want ErrInvalid naming %q", name, err, tc.rule)
				}
			}
		})
	}
	if _, err := l.TryLock(t.Context(), strings.Repeat("r", 512)); err != nil {
		t.Fatalf("a 512-byte resource is allowed: %v", err)
	}
}

func TestClosedLocker(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	l.Close()
	if _, err := l.TryLock(t.Context(), "x"); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("TryLock after Close: %v, want ErrClosed", err)
	}
}

// Slow masters are not evidence of loss: Unlock with three of five stalled
// returns nil, and the stalled masters get the release when they wake.
func TestUnlockWithStalledMajorityDefersRelease(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{MasterTimeout: 100 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "deferred")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "deferred"), lk.Token()) == 5 })
	for _, i := range []int{0, 1, 2} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock with 3 of 5 stalled: %v, want nil", err)
	}
	noKeyOn(t, c, "deferred", 3, 4)
	c.ResumeAll()
	waitGone(t, c, "deferred", "the woken masters to get the release")
}

// A forward clock jump (simulated: lab.JumpClock shrinks every key's TTL)
// on a majority lets a second client in before the first one's deadline:
// outside Redlock's assumptions. Unlock then reports the loss.
func TestUnlockAfterClockJumpReportsLoss(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	la, lb := newLocker(t, c, nil), newLocker(t, c, nil)
	a, err := la.TryLock(t.Context(), "jumped")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's token on all 5 masters", func() bool { return countValue(keyState(t, c, "jumped"), a.Token()) == 5 })
	for _, i := range []int{0, 1, 2} {
		if _, err := c.JumpClock(t.Context(), i, 11*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	b, err := lb.TryLock(t.Context(), "jumped")
	if err != nil {
		t.Fatalf("B could not take the jumped majority: %v", err)
	}
	if !a.Valid() || !b.Valid() {
		t.Fatal("both should believe they hold the lock: that is the violation a clock jump causes")
	}
	err = a.Unlock(t.Context())
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrLost) || !errors.As(err, &e) || e.Count(quorum.Refused) != 3 {
		t.Fatalf("A's Unlock: %v, want ErrLost with 3 masters held by B", err)
	}
	if got := keyState(t, c, "jumped"); countValue(got, b.Token()) != 3 {
		t.Fatalf("B's keys after A's Unlock: %q", got)
	}
	b.Unlock(t.Context())
}

// The defaults written in Options' comments are the ones in force.
func TestDefaults(t *testing.T) {
	c := lab.ForTest(t, 1, nil)
	for _, tc := range []struct {
		ttl, nodeTimeout time.Duration
	}{
		{0, 50 * time.Millisecond},                    // 10s/200
		{20 * time.Second, 50 * time.Millisecond},     // capped
		{4 * time.Second, 20 * time.Millisecond},      // TTL/200
		{time.Second, 10 * time.Millisecond},          // floor
		{20 * time.Millisecond, 5 * time.Millisecond}, // at most TTL/4
	} {
		l, err := redlock.New(c.Clients(), &redlock.Options{TTL: tc.ttl})
		if err != nil {
			t.Fatal(err)
		}
		o := l.Options()
		l.Close()
		if o.MasterTimeout != tc.nodeTimeout {
			t.Errorf("TTL %v: MasterTimeout %v, want %v", tc.ttl, o.MasterTimeout, tc.nodeTimeout)
		}
		if tc.ttl == 0 && (o.TTL != 10*time.Second || o.DriftFactor != 0.01 || o.DriftConstant != 2*time.Millisecond ||
			o.SafetyMargin != 0 || o.KeyPrefix != "redlock:" || o.Fencing || o.Retry.MaxAttempts != 0 ||
			o.Retry.MinDelay != 5*time.Millisecond || o.Retry.MaxDelay != 100*time.Millisecond) {
			t.Errorf("defaults: %+v", o)
		}
	}
}
