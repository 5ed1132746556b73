package quorum_test

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A round may need every node, down to one node of one; a node index at
// the end of the range is ignored like any other out of range.
func TestRoundBounds(t *testing.T) {
	for _, c := range [][2]int{{1, 1}, {3, 3}, {5, 5}} {
		r, err := quorum.NewRound(c[0], c[1], false, time.Now())
		if err != nil {
			t.Fatalf("NewRound(%d nodes, need %d): %v", c[0], c[1], err)
		}
		if !r.Deliver(c[0], ok) {
			t.Fatalf("NewRound(%d, %d): node %d reported late, want ignored", c[0], c[1], c[0])
		}
		if r.Decided() {
			t.Fatalf("NewRound(%d, %d): decided by a reply from node %d, out of range", c[0], c[1], c[0])
		}
	}
}

// A reply without a latency is given the time since the round's start; a
// reply with one keeps it.
func TestLatencyOfAReply(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	r, err := quorum.NewRound(3, 2, true, start)
	if err != nil {
		t.Fatal(err)
	}
	r.Deliver(0, quorum.Reply{Outcome: quorum.OK})
	r.Deliver(1, quorum.Reply{Outcome: quorum.Refused, Latency: 5 * time.Millisecond})
	r.Skip(2, quorum.Unavailable, quorum.ErrUnavailable)
	res := r.Wait(t.Context(), 2*time.Hour)
	if res.Replies[0].Latency < time.Hour || res.Replies[1].Latency != 5*time.Millisecond || res.Replies[2].Latency != 0 {
		t.Fatalf("latencies %v, %v, %v: want ≥ 1h (since the start), 5ms (its own), 0 (skipped)",
			res.Replies[0].Latency, res.Replies[1].Latency, res.Replies[2].Latency)
	}
}
