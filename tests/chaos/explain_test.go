package chaos

import (
	"testing"
	"time"
)

// Each failed Campaign is judged against the liveness bound's premise
// (explain.go): a majority answered the prober from a TTL before the call
// to its end, prober rounds covered all of it, at most one leadership
// ended unreleased in that span, and no leader fault landed on the caller. Only a failure whose premise held
// is a violation.
func TestExplainFailuresJudgesThePremise(t *testing.T) {
	ms := int64(time.Millisecond)
	ttl := 500 * time.Millisecond
	var samples []reachSample
	for at := int64(0); at < 30_000*ms; at += 20 * ms {
		up := 5
		if at >= 10_000*ms && at < 10_100*ms {
			up = 2 // no majority for 100 ms
		}
		if at >= 12_000*ms && at < 13_500*ms {
			continue // the prober did not run for 1.5 s
		}
		samples = append(samples, reachSample{at, up})
	}
	p := &prober{samples: samples, timeout: 50 * time.Millisecond}
	leaderFault := func(at int64, leader int) Episode {
		return Episode{Fault: Fault{Kind: FreezeLeader}, From: at, To: at + 1_000*ms, Leader: leader}
	}
	masterFault := Episode{Fault: Fault{Kind: PauseMasters, Masters: []int{0, 1}}, From: 3_000 * ms, To: 4_000 * ms}
	eps := []Episode{masterFault, leaderFault(16_000*ms, 9), leaderFault(21_000*ms, 9), leaderFault(22_000*ms, 9), leaderFault(26_000*ms, 7)}
	h := &History{}
	failed := func(client int, start int64) {
		h.addAcquire(Acquire{Client: client, Start: start, Latency: 2 * time.Second, Err: "deadline"})
	}
	failed(1, 2_000*ms)  // a minority paused: premise held
	failed(1, 10_300*ms) // no majority a TTL before it: not held
	failed(1, 12_800*ms) // 5 answered before and after the prober's gap: not held
	failed(1, 16_200*ms) // one leader frozen: held
	failed(1, 21_200*ms) // two leaders frozen: not held
	failed(7, 26_200*ms) // its own leadership frozen: not held
	h.addLeadership(Leadership{Client: 2, Seq: 1, Term: 5, At: 2_100 * ms})
	h.addSection(Section{Client: 2, Seq: 1, Enter: 2_100 * ms, Exit: 2_200 * ms, Lapsed: true})
	h.addAcquire(Acquire{Client: 1, OK: true, Start: 2_000 * ms, Latency: time.Millisecond})

	fcs := explainFailures(h, eps, p, ttl, 3)
	want := []struct {
		premise    bool
		min        int
		unreleased int
		own        bool
	}{{true, 5, 1, false}, {false, 2, 0, false}, {false, 5, 0, false}, {true, 5, 1, false}, {false, 5, 2, false}, {false, 5, 1, true}}
	if len(fcs) != len(want) {
		t.Fatalf("%d failed Campaigns explained, want %d", len(fcs), len(want))
	}
	for i, w := range want {
		fc := fcs[i]
		if fc.Premise != w.premise || fc.MinAnswering != w.min || fc.Unreleased != w.unreleased || fc.Own != w.own {
			t.Errorf("failure %d: premise %v, fewest %d, unreleased %d, own %v; want %+v (%s)", i, fc.Premise, fc.MinAnswering, fc.Unreleased, fc.Own, w, fc)
		}
	}
	// The gap runs from the last round's cover (11 980 ms + 140 ms) to
	// 13 500 ms: the third call's span starts a TTL before it, at 12 300
	// ms; the second's ends at 12 300 ms, 180 ms into the gap.
	for i, w := range []time.Duration{0, 180 * time.Millisecond, 1200 * time.Millisecond, 0, 0, 0} {
		if got := fcs[i].Unobserved; got != w {
			t.Errorf("failure %d: unobserved %v, want %v", i, got, w)
		}
	}
	if got := fcs[0]; len(got.Episodes) != 1 || len(got.Leaders) != 1 || !got.Leaders[0].Lapsed || got.Leaders[0].Enter != 100*time.Millisecond {
		t.Errorf("failure 0: episodes %+v, leaders %+v; want the master fault and the lapsed leadership 100 ms in", got.Episodes, got.Leaders)
	}
}
