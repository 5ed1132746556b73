package redlock

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The keeper's lead, from the recorded round times alone (no clock, no
// master): a third of the window until three p99 rounds are more; the p99
// of 128 samples is the second largest, so one slow round does not move it
// and two do; older samples are forgotten once 128 newer ones came.
func TestPaceLead(t *testing.T) {
	const w = 990 * time.Millisecond
	var p pace
	if got := p.lead(w); got != w/3 {
		t.Fatalf("lead without rounds: %v, want a third of the window %v", got, w/3)
	}
	for range paceSamples {
		p.record(2 * time.Millisecond)
	}
	if got := p.lead(w); got != w/3 {
		t.Fatalf("lead after fast rounds: %v, want %v", got, w/3)
	}
	p.record(time.Second)
	if got := p.lead(w); got != w/3 {
		t.Fatalf("lead after one slow round in %d: %v, want %v (the p99 is the second largest)", paceSamples, got, w/3)
	}
	p.record(time.Second)
	if got := p.lead(w); got != 3*time.Second {
		t.Fatalf("lead after two slow rounds: %v, want 3 × 1s", got)
	}
	for range paceSamples {
		p.record(200 * time.Millisecond)
	}
	if got := p.lead(w); got != 600*time.Millisecond {
		t.Fatalf("lead after %d rounds of 200ms: %v, want 3 × 200ms", paceSamples, got)
	}
}

// Each master's answer times are recorded from a round's replies that
// answered, yes or no; a timeout or a skipped master records nothing.
func TestPaceObservesAnswersOnly(t *testing.T) {
	p := pace{masters: make([]roundTimes, 3)}
	p.observe(quorum.Result{Replies: []quorum.Reply{
		{Outcome: quorum.OK, Latency: 5 * time.Millisecond},
		{Outcome: quorum.Refused, Latency: 7 * time.Millisecond},
		{Outcome: quorum.TimedOut, Latency: 50 * time.Millisecond},
	}})
	for i, want := range []time.Duration{5 * time.Millisecond, 7 * time.Millisecond, 0} {
		if p50, p99 := p.masters[i].quantiles(); p50 != want || p99 != want {
			t.Errorf("master %d: p50 %v p99 %v, want %v", i, p50, p99, want)
		}
	}
}
