package chaos

import (
	"testing"
	"time"
)

// The prober's figures: the time without a majority runs from a round that
// found fewer than need masters to the next round (a round waits for a
// stalled master's MasterTimeout, so rounds are not reachEvery apart), and a
// failed call counts when it waited through any of that time.
func TestProberFill(t *testing.T) {
	ms := int64(time.Millisecond)
	p := &prober{samples: []reachSample{{0, 5}, {20 * ms, 2}, {70 * ms, 5}, {90 * ms, 1}}}
	as := []Acquire{
		{OK: false, Start: 60 * ms, Latency: 5 * time.Millisecond},  // inside the first span
		{OK: false, Start: 72 * ms, Latency: 10 * time.Millisecond}, // between the spans
		{OK: true, Start: 10 * ms, Latency: 50 * time.Millisecond},  // succeeded: not counted
		{OK: false, Start: 100 * ms, Latency: time.Millisecond},     // inside the last span
		{OK: false, Latency: time.Second},                           // no start recorded
	}
	var r Result
	p.fill(&r, 3, as)
	if want := 50*time.Millisecond + reachEvery; r.MinorityExceeded != want {
		t.Errorf("MinorityExceeded = %v, want %v (20–70 ms, and the last round's reachEvery)", r.MinorityExceeded, want)
	}
	if r.FailedWithoutMajority != 2 {
		t.Errorf("FailedWithoutMajority = %d, want 2", r.FailedWithoutMajority)
	}
}
