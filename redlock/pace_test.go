package redlock_test

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The keeper extends earlier when the masters are slow: with 60 ms of
// latency each way on every master (rounds of 120 ms or more), it starts
// its first extension with at least 3 × 120 ms of the window left, earlier
// than a third of the window (the rule without latency) could ever make
// it; without latency it keeps to a third. Held through many extensions at
// that latency, the lock is never lost.
func TestKeeperExtendsEarlierUnderLatency(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	opts := &redlock.Options{TTL: 500 * time.Millisecond, NodeTimeout: 300 * time.Millisecond}
	const w = 500*time.Millisecond - 7*time.Millisecond // 500 − (5 + 2) ms of drift
	// firstExtension returns when the first extension started, counted
	// from the acquisition's start: an extension's deadline is its start
	// plus the window.
	firstExtension := func(l *redlock.Locker, resource string) (*redlock.Held, time.Duration) {
		h, err := l.Hold(t.Context(), resource)
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
		if err := c.Latency(i, 60*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.N() {
			c.Latency(i, 0)
		}
	})
	h, late := firstExtension(slow, "pace-slow")
	if rtt := h.Acquisition().Elapsed; rtt < 120*time.Millisecond {
		t.Fatalf("acquisition took %v through 60 ms each way", rtt)
	}
	if old := w - w/3 - w/30; late >= old || late >= idle {
		t.Fatalf("with 60 ms latency the first extension began %v after the acquisition; want before %v (the earliest a third of the window allows) and before %v (without latency)", late, old, idle)
	}
	// Keep it through several extensions at that latency: never lost.
	until := time.Now().Add(4 * w)
	for time.Now().Before(until) {
		if err := h.Err(); err != nil {
			t.Fatalf("lost while the masters answered in about 120 ms (NodeTimeout 300 ms): %v", err)
		}
		time.Sleep(5 * time.Millisecond) // sampling pace
	}
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
