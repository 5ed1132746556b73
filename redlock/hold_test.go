package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// pttls returns, per master, the lock key's PTTL (negative when absent).
func pttls(t *testing.T, c *lab.Masters, resource string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, c.N())
	for i := range c.N() {
		d, err := c.Client(i).PTTL(t.Context(), "redlock:{"+resource+"}").Result()
		if err != nil {
			t.Fatalf("PTTL on master %d: %v", i, err)
		}
		out[i] = d
	}
	return out
}

// Two TTLs on one Locker: each lock's Deadline and keys follow its own.
func TestPerLockTTL(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{TTL: 10 * time.Second})
	ctx := t.Context()

	short, err := l.TryLock(ctx, "short", redlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	long, err := l.Lock(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	// deadline = start + TTL − (TTL×0.01 + 2ms) − SafetyMargin, exactly.
	for _, tc := range []struct {
		lk     *redlock.Lock
		ttl    time.Duration
		window time.Duration
	}{{short, 2 * time.Second, 1978 * time.Millisecond}, {long, 10 * time.Second, 9898 * time.Millisecond}} {
		a := tc.lk.Acquisition()
		if a.TTL != tc.ttl || tc.lk.TTL() != tc.ttl {
			t.Errorf("%s: Acquisition().TTL %v, TTL() %v; want %v", tc.lk.Resource(), a.TTL, tc.lk.TTL(), tc.ttl)
		}
		if got := tc.lk.Deadline().Sub(a.Start); got != tc.window {
			t.Errorf("%s: Deadline − Start = %v, want %v", tc.lk.Resource(), got, tc.window)
		}
	}
	// A round returns at a majority: wait for the others' SETs to land.
	waitFor(t, "both locks on all 5 masters", func() bool {
		return countValue(keyState(t, c, "short"), short.Token()) == 5 && countValue(keyState(t, c, "long"), long.Token()) == 5
	})
	for i, d := range pttls(t, c, "short") {
		if d <= time.Second || d > 2*time.Second {
			t.Errorf("short: PTTL on master %d = %v, want in (1s, 2s]", i, d)
		}
	}
	for i, d := range pttls(t, c, "long") {
		if d <= 9*time.Second || d > 10*time.Second {
			t.Errorf("long: PTTL on master %d = %v, want in (9s, 10s]", i, d)
		}
	}

	// An extension with its own TTL sets it from then on.
	if err := short.Extend(ctx, redlock.WithTTL(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if short.TTL() != 5*time.Second {
		t.Errorf("TTL after Extend(WithTTL(5s)) = %v", short.TTL())
	}
	// Extend too returns at a majority: wait for every PEXPIRE to land.
	allIn := func(lo, hi time.Duration) func() bool {
		return func() bool {
			for _, d := range pttls(t, c, "short") {
				if d <= lo || d > hi {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "short's PTTL in (4s, 5s] on every master after Extend(WithTTL(5s))", allIn(4*time.Second, 5*time.Second))
	if err := short.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	// Still in (4s, 5s], not reset to 2s: the 5s TTL is kept.
	waitFor(t, "short's PTTL in (4s, 5s] on every master after a plain Extend", allIn(4*time.Second, 5*time.Second))
	// Any stray 2s PEXPIRE has landed once l's next round has been
	// answered by every master: each runs l's commands in order.
	redlock.WarmUp(l)
	for i, d := range pttls(t, c, "short") {
		if d <= 3*time.Second {
			t.Errorf("short after a plain extend: PTTL on master %d = %v, want the 5s TTL kept", i, d)
		}
	}

	// Invalid TTLs: ErrInvalid naming the rule, nothing written. (Zero
	// means the default: TestWithTTLZeroMeansTheDefault.)
	for _, tc := range []struct {
		ttl  time.Duration
		rule string
	}{
		{1500*time.Millisecond + 500*time.Microsecond, "whole number of milliseconds"},
		{100 * time.Millisecond, "longer than MasterTimeout"},
		{-time.Second, "TTL"},
	} {
		if lk, err := l.TryLock(ctx, "bad", redlock.WithTTL(tc.ttl)); !errors.Is(err, redlock.ErrInvalid) || lk != nil || !strings.Contains(fmt.Sprint(err), tc.rule) {
			t.Errorf("WithTTL(%v): %v, %v; want ErrInvalid naming %q", tc.ttl, lk, err, tc.rule)
		}
		if err := short.Extend(ctx, redlock.WithTTL(tc.ttl)); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Extend(WithTTL(%v)): %v, want ErrInvalid", tc.ttl, err)
		}
	}
	noKeyOn(t, c, "bad", 0, 1, 2, 3, 4)
	if short.TTL() != 5*time.Second {
		t.Errorf("an invalid extension changed the TTL to %v", short.TTL())
	}
	for _, lk := range []*redlock.Lock{short, long} {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A held lock stays on a majority for 5× its TTL; with 3 of 5 masters
// stalled it is over with ErrLost for a holder that looks past its
// Deadline, and Done closes (lostByDeadline); Unlock after that says so;
// no goroutine is left (TestMain's goleak).
func TestHoldKeepsAndSignalsLoss(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 800 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 100 * time.Millisecond})
	h, err := redlock.Hold(l, t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	if lk, ok := redlock.FromContext(h.Context()); !ok || lk != h {
		t.Fatalf("FromContext(h.Context()) = %v, %v", lk, ok)
	}
	if err := h.Keep(); err != nil {
		t.Fatalf("Keep on a kept lock: %v, want nil (it does nothing)", err)
	}
	start := time.Now()
	observe(start.Add(5*ttl), 5*time.Millisecond, func() bool {
		if err := h.Err(); err != nil {
			t.Fatalf("lost after %v: %v", time.Since(start), err)
		}
		if got := majorityHolder(t, c, "leader"); got != h.Token() {
			t.Fatalf("after %v the majority does not hold the token: %q", time.Since(start), keyState(t, c, "leader"))
		}
		return true
	})

	for _, i := range []int{0, 1, 2} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	stalled := time.Now()
	if deadline := h.Deadline(); deadline.Before(stalled) {
		t.Errorf("the deadline %v passed before the stall", stalled.Sub(deadline))
	}
	late := lostByDeadline(t, "the kept lock", h, 10*ttl)
	t.Logf("its loss timer ran %v relative to its deadline", late)
	if err := h.Err(); !errors.Is(err, redlock.ErrLost) || !errors.Is(context.Cause(h.Context()), redlock.ErrLost) {
		t.Errorf("Err() = %v, Cause = %v; want ErrLost", err, context.Cause(h.Context()))
	}
	if err := h.Unlock(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Errorf("Unlock after loss: %v, want ErrLost", err)
	}
	c.ResumeAll()
	waitGone(t, c, "leader", "the lost lock's keys to go")
}

// Unlock ends a held lock: Done closes with context.Canceled, the keys go,
// and a second Unlock reports it.
func TestHoldUnlock(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(t.Context(), "held", redlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Keep(); err != nil {
		t.Fatal(err)
	}
	h := lk
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done not closed by Unlock")
	}
	if !errors.Is(h.Err(), context.Canceled) {
		t.Errorf("Err after Unlock = %v, want context.Canceled", h.Err())
	}
	noKeyOn(t, c, "held", 0, 1, 2)
	if err := h.Unlock(t.Context()); !errors.Is(err, redlock.ErrUnlocked) || errors.Is(err, redlock.ErrLost) {
		t.Errorf("second Unlock: %v, want ErrUnlocked, not ErrLost", err)
	}
}

// An Extend with a shorter TTL moves the deadline earlier: a held lock's
// loss is then declared by the new deadline, not the old one, and the
// keeper plans its extensions from the new TTL. The masters keep the key
// at least until the deadline (an extension never shortens a key, §6:
// they keep the longer life the first TTL gave it).
func TestHoldExtendWithShorterTTL(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{TTL: 5 * time.Second, MasterTimeout: 100 * time.Millisecond})
	h, err := redlock.Hold(l, t.Context(), "shorter")
	if err != nil {
		t.Fatal(err)
	}
	const short = 600 * time.Millisecond
	if err := h.Extend(t.Context(), redlock.WithTTL(short)); err != nil {
		t.Fatal(err)
	}
	if until := time.Until(h.Deadline()); until > short {
		t.Fatalf("deadline in %v after Extend(WithTTL(%v))", until, short)
	}
	// Kept on the short TTL for 3 of them.
	start := time.Now()
	observe(start.Add(3*short), 10*time.Millisecond, func() bool {
		if err := h.Err(); err != nil {
			t.Fatalf("lost after %v: %v", time.Since(start), err)
		}
		ds := pttls(t, c, "shorter")
		until := time.Until(h.Deadline()) // read after the PTTLs: each key lived longer when read
		for i, d := range ds {
			if d < until {
				t.Fatalf("master %d: PTTL %v, under the %v to the deadline", i, d, until)
			}
		}
		return true
	})
	for _, i := range []int{0, 1, 2} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	late := lostByDeadline(t, "the kept lock", h, 5*time.Second)
	t.Logf("its loss timer ran %v relative to its deadline", late)
	if err := h.Unlock(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Errorf("Unlock after loss: %v, want ErrLost", err)
	}
}
