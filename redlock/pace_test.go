package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The keeper extends earlier when the masters are slow: with 100 ms of
// latency each way on every master (rounds of 200 ms or more), it starts
// its first extension with at least 3 × 200 ms of the window left, earlier
// than a third of the window (the rule without latency) could ever make
// it; without latency it keeps to a third. Held through many extensions at
// that latency, the lock is never lost.
func TestKeeperExtendsEarlierUnderLatency(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	opts := &redlock.Options{TTL: time.Second, MasterTimeout: 400 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	const w = time.Second - 12*time.Millisecond // 1 000 − (10 + 2) ms of drift
	// firstExtension returns when the first extension started, counted
	// from the acquisition's start: an extension's deadline is its start
	// plus the window.
	firstExtension := func(l *redlock.Locker, resource string) (*redlock.Lock, time.Duration) {
		h, err := redlock.Hold(l, t.Context(), resource)
		if err != nil {
			t.Fatal(err)
		}
		start, d0 := h.Acquisition().Start, h.Deadline()
		if d0.Sub(start) != w {
			t.Fatalf("window %v, want %v", d0.Sub(start), w)
		}
		waitFor(t, "the first extension", func() bool { return h.Deadline() != d0 || h.Err() != nil })
		if h.Err() != nil {
			t.Fatalf("lost before its first extension: %v", h.Err())
		}
		return h, h.Deadline().Add(-w).Sub(start)
	}
	fast := newLocker(t, c, opts)
	h, idle := firstExtension(fast, "pace-idle")
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A third of the window, less up to a thirtieth of jitter.
	if earliest := w - w/3 - w/30 - time.Millisecond; idle < earliest {
		t.Fatalf("without latency the first extension began %v after the acquisition, before %v", idle, earliest)
	}

	slow := newLocker(t, c, opts) // a Locker of its own: no fast rounds in its record
	for i := range c.N() {
		if err := c.Latency(i, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.N() {
			c.Latency(i, 0)
		}
	})
	h, late := firstExtension(slow, "pace-slow")
	if rtt := h.Acquisition().Elapsed; rtt < 200*time.Millisecond {
		t.Fatalf("acquisition took %v through 100 ms each way", rtt)
	}
	if old := w - w/3 - w/30; late >= old || late >= idle {
		t.Fatalf("with 100 ms latency the first extension began %v after the acquisition; want before %v (the earliest a third of the window allows) and before %v (without latency)", late, old, idle)
	}
	// Keep it through several extensions at that latency: never lost.
	observe(time.Now().Add(4*w), 5*time.Millisecond, func() bool {
		if err := h.Err(); err != nil {
			t.Fatalf("lost while the masters answered in about 200 ms (MasterTimeout 400 ms): %v (%v)", err, context.Cause(h.Context()))
		}
		return true
	})
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Stats reports each master's answer times, and SustainableTTL follows the
// slowest: with 30 ms of latency each way on master 4 only, its p50 and
// p99 are 60 ms or more, above every other master's, and the sustainable
// TTL is what nine of the slowest p99 rounds need, never less than what
// three MasterTimeouts need. The assertions hold on a loaded machine: the
// latency only adds to what scheduling does, and SustainableTTL is checked
// against the Stats it reads, whatever they are.
func TestStatsReportRoundTimes(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	const nt = 100 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{MasterTimeout: nt})
	// cycle takes and releases the lock n times. A round that missed
	// MasterTimeout on a loaded machine is not what this test is about:
	// it is tried again (its answers were timed all the same).
	cycle := func(n int) {
		for n > 0 {
			lk, err := l.TryLock(t.Context(), "stats")
			if errors.Is(err, redlock.ErrNotAcquired) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			n--
		}
	}
	// sustainable is SustainableTTL from st (default SafetyMargin 0,
	// DriftConstant 2 ms, DriftFactor 0.01), in whole ms rounded up.
	sustainable := func(st []redlock.MasterStats) time.Duration {
		var p99 time.Duration
		for _, s := range st {
			p99 = max(p99, s.RoundP99)
		}
		w := max(9*p99, 3*nt) + 2*time.Millisecond
		return (time.Duration(math.Ceil(float64(w)/0.99)) + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	// read is SustainableTTL and the Stats it was computed from: a
	// release's last answers may still be recorded after Unlock returned.
	read := func() (time.Duration, []redlock.MasterStats) {
		for {
			got, st := l.SustainableTTL(), l.Stats()
			if l.SustainableTTL() == got {
				return got, st
			}
		}
	}
	cycle(10)
	// (3 × 100 ms + 2 ms) / 0.99 = 305.05 ms, or more where the local
	// masters' p99 passed 33 ms.
	if got, st := read(); got != sustainable(st) || got < 306*time.Millisecond {
		t.Fatalf("SustainableTTL on local masters: %v, want %v (from their Stats) and ≥ 306ms", got, sustainable(st))
	}
	if err := c.Latency(4, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Latency(4, 0) })
	// Master 4 answers after the majority, so only the releases (which
	// wait for every master) time it: 130 of them fill its 128 samples.
	cycle(130)
	ttl, st := read()
	if st[4].RoundP50 < 60*time.Millisecond || st[4].RoundP99 < st[4].RoundP50 {
		t.Fatalf("master 4 behind 30 ms each way: p50 %v p99 %v, want ≥ 60ms", st[4].RoundP50, st[4].RoundP99)
	}
	for i := range 4 {
		if st[i].RoundP50 <= 0 || st[i].RoundP50 >= st[4].RoundP50 {
			t.Fatalf("master %d (no latency): p50 %v, want above 0 and below master 4's %v", i, st[i].RoundP50, st[4].RoundP50)
		}
	}
	// At least (9 × 60 ms + 2 ms) / 0.99 ≈ 548 ms.
	if want := sustainable(st); ttl != want || ttl < 548*time.Millisecond {
		t.Fatalf("SustainableTTL with a 60 ms master: %v, want %v (from its Stats) and ≥ 548ms", ttl, want)
	}
}

// The keeper's extensions wait for the masters longer than MasterTimeout: a
// quarter of the time the lock has left (docs/design.md §8). With 25 ms of
// latency each way on every master, each round takes 50 ms or more, past a
// MasterTimeout of 20 ms but well inside the window: a lock taken before the
// latency came is kept through several windows, its deadline moving on.
// (Extensions cut at MasterTimeout fail there every time, and the lock is
// lost at its first deadline.) A plain Extend still gives up at
// MasterTimeout.
func TestKeeperWaitsPastNodeTimeoutForSlowMasters(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	const ttl = 2 * time.Second
	l := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 20 * time.Millisecond})
	h, err := redlock.Hold(l, t.Context(), "keep-slow")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(t.Context(), "extend-slow")
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.N() {
		if err := c.Latency(i, 25*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.N() {
			c.Latency(i, 0)
		}
	})
	first := h.Deadline()
	observe(first.Add(2*ttl), 5*time.Millisecond, func() bool {
		if err := h.Err(); err != nil {
			t.Fatalf("lost while every master answered in about 50 ms (MasterTimeout 20 ms, TTL %v): %v (%v)", ttl, err, context.Cause(h.Context()))
		}
		return true
	})
	if d := h.Deadline(); !d.After(first.Add(ttl)) {
		t.Fatalf("deadline %v, not moved on by the extensions from %v", d, first)
	}
	err = lk.Extend(t.Context())
	if !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("a plain Extend through 50 ms rounds with MasterTimeout 20 ms: %v, want ErrLost", err)
	}
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Close does not wait for a keeper's extension past MasterTimeout: with 3 of
// 5 masters stalled, an extension would wait a quarter of the lock's time
// left (here about 2 s), but Close, called while it waits, returns well
// before that, and the extension fails.
func TestCloseCutsTheKeepersLongWait(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l, err := redlock.New(c.Clients(), &redlock.Options{TTL: 8 * time.Second, MasterTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	redlock.WarmUp(l) // a cold first round overruns 20 ms on a loaded machine
	lk, err := l.TryLock(t.Context(), "close-cuts")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.ResumeAll)
	written := l.Stats()
	began := time.Now()
	got := make(chan error, 1)
	go func() { got <- redlock.KeeperExtend(lk) }()
	// The extension is waiting (its wait: about 2 s) once it was written
	// to every master, the stalled ones too.
	waitFor(t, "the extension written to every master", func() bool {
		for i, s := range l.Stats() {
			if s.Written == written[i].Written {
				return false
			}
		}
		return true
	})
	closed := make(chan time.Duration, 1)
	go func() {
		l.Close()
		closed <- time.Since(began)
	}()
	select {
	case err := <-got:
		if !errors.Is(err, redlock.ErrLost) {
			t.Fatalf("the extension cut by Close: %v, want ErrLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the extension still waits 5 s after it began")
	}
	if d := <-closed; d >= time.Second {
		t.Fatalf("Close returned %v after the extension began: it waited for the extension's long wait", d)
	}
}
