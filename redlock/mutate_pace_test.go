package redlock

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The keeper's pace (pace.go): the p99 of the last paceSamples round
// times, each master's median and p99 answer time, and which answers a
// round records (the ring's index and count, the quantiles' index
// arithmetic and observe's conditions lived or were not covered).
func TestMutatePace(t *testing.T) {
	ms := func(i int) time.Duration { return time.Duration(i) * time.Millisecond }
	var p pace
	if got := p.p99(); got != 0 {
		t.Errorf("p99 of no rounds: %v, want 0", got)
	}
	for i := 1; i <= 100; i++ {
		p.record(ms(i))
	}
	if got := p.p99(); got != ms(99) {
		t.Errorf("p99 of 1..100ms: %v, want the 99th smallest, 99ms", got)
	}
	// The ring keeps the last paceSamples: 128 rounds of 1ms push the
	// others out.
	for range paceSamples {
		p.record(ms(1))
	}
	if got := p.p99(); got != ms(1) {
		t.Errorf("p99 once 1..100ms were pushed out: %v, want 1ms", got)
	}

	var m roundTimes
	if p50, p99 := m.quantiles(); p50 != 0 || p99 != 0 {
		t.Errorf("quantiles of no answers: %v, %v, want 0, 0", p50, p99)
	}
	m.record(ms(7))
	if p50, p99 := m.quantiles(); p50 != ms(7) || p99 != ms(7) {
		t.Errorf("quantiles of one 7ms answer: %v, %v", p50, p99)
	}
	for i := 2; i <= 100; i++ {
		m.record(ms(i))
	}
	if p50, p99 := m.quantiles(); p50 != ms(50) || p99 != ms(99) {
		t.Errorf("quantiles of 7, 2..100ms: %v, %v, want 50ms, 99ms", p50, p99)
	}

	// A round records the masters that answered, yes or no; one reply
	// more than the masters is no master's.
	p = pace{masters: make([]roundTimes, 3)}
	p.observe(quorum.Result{Replies: []quorum.Reply{
		{Outcome: quorum.OK, Latency: ms(1)}, {Outcome: quorum.Refused, Latency: ms(2)},
		{Outcome: quorum.TimedOut, Latency: ms(3)}, {Outcome: quorum.OK, Latency: ms(4)},
	}})
	for i, want := range []time.Duration{ms(1), ms(2), 0} {
		if p50, _ := p.masters[i].quantiles(); p50 != want {
			t.Errorf("master %d after a round: median %v, want %v", i, p50, want)
		}
	}
}
