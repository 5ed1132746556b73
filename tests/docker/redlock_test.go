package docker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// newLocker builds a Locker over the cluster with its own default go-redis
// clients. Its cleanup resumes paused masters first, so that Close does not
// wait for calls stuck on them for go-redis's ReadTimeout.
func newLocker(t *testing.T, c *lab.Masters, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	clients := c.Clients()
	// Dial now: a cold client's first call also handshakes, through
	// docker-proxy, which can overrun MasterTimeout on a loaded machine and
	// fail a round the test did not mean to fail.
	for _, cl := range clients {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A MasterTimeout a loaded machine does not overrun where the test
	// sets none: at load 11 on 2 cores the default 50 ms timed out all
	// five masters through docker-proxy (TestThreePausedMastersFail saw
	// 0 ok, not 2). Stalls stay stalls: a paused master never answers.
	o := redlock.Options{}
	if opts != nil {
		o = *opts
	}
	if o.MasterTimeout == 0 {
		o.MasterTimeout = 500 * time.Millisecond
	}
	l, err := redlock.New(clients, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	return l
}

// keyState returns, for each master in which (all when nil), the lock key's
// value ("" when absent).
func keyState(t *testing.T, c *lab.Masters, resource string, which ...int) []string {
	t.Helper()
	if which == nil {
		for i := range c.N() {
			which = append(which, i)
		}
	}
	out := make([]string, len(which))
	for j, i := range which {
		v, err := c.Client(i).Get(t.Context(), "redlock:{"+resource+"}").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET on master %d: %v", i, err)
		}
		out[j] = v
	}
	return out
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

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Mutual exclusion over Docker masters: 8 Lockers, each with its own
// clients, contend with Lock for one resource, 25 critical sections each.
func TestMutualExclusion(t *testing.T) {
	const lockers, rounds = 8, 25
	c := dockerCluster(t)
	ls := make([]*redlock.Locker, lockers)
	for i := range ls {
		ls[i] = newLocker(t, c, nil)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var holders, maxHolders, done, late atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w, l := range ls {
		wg.Go(func() {
			for r := range rounds {
				lk, err := l.Lock(ctx, "mutex")
				if err != nil {
					t.Errorf("locker %d round %d: Lock: %v", w, r, err)
					return
				}
				n := holders.Add(1)
				for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
				}
				// Hold it a little, so that an overlap, if the lock
				// allowed one, would have room to show.
				time.Sleep(200 * time.Microsecond)
				if !time.Now().Before(lk.Deadline()) {
					late.Add(1)
				}
				holders.Add(-1)
				done.Add(1)
				// Slow masters are not evidence of loss, so before the
				// deadline Unlock must succeed, however loaded the machine.
				if err := lk.Unlock(ctx); err != nil {
					t.Errorf("locker %d round %d: Unlock: %v", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d critical sections by %d Lockers in %v", done.Load(), lockers, time.Since(start).Round(time.Millisecond))
	if m := maxHolders.Load(); m != 1 {
		t.Errorf("at most %d holders at once, want exactly 1", m)
	}
	if n := done.Load(); n != lockers*rounds {
		t.Errorf("%d critical sections, want %d", n, lockers*rounds)
	}
	if n := late.Load(); n != 0 {
		t.Errorf("%d holders left their critical section after Deadline()", n)
	}
	// Releases that overran MasterTimeout finish on their own, or go out
	// when the master answers again.
	waitFor(t, 5*time.Second, "no key left after the last Unlock", func() bool {
		return countValue(keyState(t, c, "mutex"), "") == 5
	})
}

// Two of five masters frozen with docker pause: acquiring and unlocking
// still succeed, each within 10× MasterTimeout.
func TestTwoPausedMastersStillAcquire(t *testing.T) {
	c := dockerCluster(t)
	l := newLocker(t, c, nil)
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
			t.Fatalf("round %d: TryLock with 2 of 5 paused: %v", round, err)
		}
		took := time.Since(start)
		if took > 10*nt {
			t.Fatalf("round %d: TryLock took %v, over 10× MasterTimeout (%v)", round, took, nt)
		}
		for _, i := range []int{1, 3} {
			if o := lk.Acquisition().Masters[i].Outcome; o == quorum.OK {
				t.Fatalf("round %d: paused master %d answered ok", round, i)
			}
		}
		if got := keyState(t, c, "stall", 0, 2, 4); countValue(got, lk.Token()) < 2 {
			t.Fatalf("round %d: token on %d of the 3 live masters right after TryLock, want at least 2", round, countValue(got, lk.Token()))
		}
		start = time.Now()
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		utook := time.Since(start)
		if utook > 10*nt {
			t.Fatalf("round %d: Unlock took %v, over 10× MasterTimeout (%v)", round, utook, nt)
		}
		t.Logf("round %d: TryLock %v, Unlock %v (MasterTimeout %v)", round, took.Round(time.Microsecond), utook.Round(time.Microsecond), nt)
		if got := keyState(t, c, "stall", 0, 2, 4); countValue(got, "") != 3 {
			t.Fatalf("round %d: live masters hold %q after Unlock, want nothing", round, got)
		}
	}
}

// Three of five masters frozen: no majority, an *Error with 2 ok and 3
// timed out, and nothing left on the two live masters.
func TestThreePausedMastersFail(t *testing.T) {
	c := dockerCluster(t)
	l := newLocker(t, c, nil)
	for _, i := range []int{0, 2, 4} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := l.TryLock(t.Context(), "minority")
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 3 of 5 paused: %v, want ErrNotAcquired", err)
	}
	e := errAs[*redlock.Error](t, err)
	if e.Count(quorum.OK) != 2 || e.Count(quorum.TimedOut) != 3 {
		t.Fatalf("outcomes: %d ok, %d timed out, want 2 and 3 (%v)", e.Count(quorum.OK), e.Count(quorum.TimedOut), err)
	}
	for _, i := range []int{0, 2, 4} {
		if e.Masters[i].Outcome != quorum.TimedOut {
			t.Errorf("paused master %d: %v, want timed out", i, e.Masters[i].Outcome)
		}
	}
	if got := keyState(t, c, "minority", 1, 3); countValue(got, "") != 2 {
		t.Fatalf("live masters 1 and 3 hold %q right after the failed TryLock, want nothing", got)
	}
	t.Logf("failed in %v: %v", took.Round(time.Microsecond), err)
	// Thawed, the frozen masters run the SETs queued in their sockets; the
	// Locker deletes them as the late replies arrive.
	c.ResumeAll()
	waitFor(t, 10*time.Second, "late-landed keys to be released", func() bool {
		return countValue(keyState(t, c, "minority"), "") == 5
	})
}

// round is one TryLock and Unlock of the worker in TestNetworkCut.
type round struct {
	start     time.Time
	took      time.Duration // TryLock alone
	err       error         // TryLock's, else Unlock's
	master0   quorum.Outcome
	cancelled bool // ended by the test stopping the worker
}

// A real partition: master 0 is disconnected from the network mid-run and
// acquisition goes on; with three cut it fails with ErrNotAcquired; healed,
// it works again on all five masters.
func TestNetworkCut(t *testing.T) {
	c := dockerCluster(t)
	l := newLocker(t, c, nil)
	nt := l.Options().MasterTimeout

	var mu sync.Mutex
	var rounds []round
	since := func(at time.Time) (ok int, bad []round) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rounds {
			switch {
			case r.start.Before(at) || r.cancelled:
			case r.err == nil:
				ok++
			default:
				bad = append(bad, r)
			}
		}
		return ok, bad
	}
	wctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			r := round{start: time.Now()}
			lk, err := l.TryLock(wctx, "cut-run")
			r.took = time.Since(r.start)
			if err == nil {
				r.master0 = lk.Acquisition().Masters[0].Outcome
				err = lk.Unlock(wctx)
			}
			r.err, r.cancelled = err, errors.Is(err, context.Canceled)
			mu.Lock()
			rounds = append(rounds, r)
			mu.Unlock()
		}
	})
	defer func() { stop(); wg.Wait() }()

	waitFor(t, 10*time.Second, "20 rounds before the cut", func() bool {
		n, _ := since(time.Time{})
		return n >= 20
	})
	cutStart := time.Now()
	if err := c.Cut(0); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	t.Logf("Cut(0) took %v", cutAt.Sub(cutStart).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "20 rounds after cutting master 0", func() bool {
		n, bad := since(cutAt)
		return n >= 20 || len(bad) > 0
	})
	stop()
	wg.Wait()
	n, bad := since(cutAt)
	for _, r := range bad {
		t.Errorf("round with master 0 cut failed after %v: %v", r.took, r.err)
	}
	var slowest time.Duration
	mu.Lock()
	for _, r := range rounds {
		if r.start.After(cutAt) && r.err == nil {
			slowest = max(slowest, r.took)
			if r.master0 == quorum.OK {
				t.Errorf("master 0 answered ok in a round that started after the cut")
			}
		}
	}
	total := len(rounds)
	mu.Unlock()
	t.Logf("%d rounds in all, %d ok with master 0 cut, slowest TryLock %v (MasterTimeout %v)", total, n, slowest.Round(time.Microsecond), nt)
	if slowest > 10*nt {
		t.Errorf("a TryLock with master 0 cut took %v, over 10× MasterTimeout (%v)", slowest, nt)
	}
	if t.Failed() {
		return
	}

	// Three of five cut: no majority.
	for _, i := range []int{1, 2} {
		if err := c.Cut(i); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := l.TryLock(t.Context(), "cut-three")
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 3 of 5 cut: %v, want ErrNotAcquired", err)
	}
	e := errAs[*redlock.Error](t, err)
	// The round is decided as soon as a majority is impossible: the three
	// cut masters fail at once, so the two live ones may not have answered
	// yet (pending) when it is.
	for i, nd := range e.Masters {
		switch cut := i < 3; {
		case cut && nd.Outcome == quorum.OK:
			t.Errorf("cut master %d answered ok", i)
		case !cut && nd.Outcome != quorum.OK && nd.Outcome != quorum.Pending:
			t.Errorf("live master %d: %v, want ok or pending", i, nd.Outcome)
		}
	}
	t.Logf("TryLock with 3 cut failed in %v: %v", took.Round(time.Microsecond), err)
	if took > 10*nt {
		t.Errorf("TryLock with 3 of 5 cut took %v, over 10× MasterTimeout (%v)", took, nt)
	}
	if got := keyState(t, c, "cut-three", 3, 4); countValue(got, "") != 2 {
		t.Fatalf("live masters 3 and 4 hold %q right after the failed TryLock, want nothing", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = l.Lock(ctx, "cut-three")
	cancel()
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock for 300ms with 3 of 5 cut: %v, want ErrNotAcquired and DeadlineExceeded", err)
	}

	// Healed: acquisition comes back, first on a majority, then on all five
	// as the breakers close.
	healAt := time.Now()
	for _, i := range []int{0, 1, 2} {
		if err := c.Heal(i); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Heal ×3 took %v", time.Since(healAt).Round(time.Millisecond))
	lk := lockWithin(t, l, "cut-heal", 20*time.Second)
	t.Logf("first acquisition %v after Heal began", time.Since(healAt).Round(time.Millisecond))
	if got := keyState(t, c, "cut-heal"); countValue(got, lk.Token()) < 3 {
		t.Fatalf("token on %d of 5 masters after the acquisition, want a majority", countValue(got, lk.Token()))
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock after Heal: %v", err)
	}
	waitFor(t, 20*time.Second, "an acquisition that lands on all 5 masters", func() bool {
		lk := lockWithin(t, l, "cut-heal", 5*time.Second)
		defer lk.Unlock(t.Context())
		// TryLock returns at the majority; give the rest a moment to land.
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if countValue(keyState(t, c, "cut-heal"), lk.Token()) == 5 {
				return true
			}
		}
		return false
	})
	t.Logf("all 5 masters back %v after Heal began", time.Since(healAt).Round(time.Millisecond))
	waitFor(t, 5*time.Second, "no key left after Unlock", func() bool {
		return countValue(keyState(t, c, "cut-heal"), "") == 5
	})
}

// lockWithin polls Lock, each attempt bounded to a second, until it
// acquires resource or within has passed.
func lockWithin(t *testing.T, l *redlock.Locker, resource string, within time.Duration) *redlock.Lock {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		lk, err := l.Lock(ctx, resource)
		cancel()
		if err == nil {
			return lk
		}
		if !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("Lock: %v, want success or ErrNotAcquired", err)
		}
		last = err
	}
	t.Fatalf("no acquisition of %q within %v: %v", resource, within, fmt.Sprint(last))
	return nil
}
