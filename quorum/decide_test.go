package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The round is decided as failed only once a majority has become
// impossible: with 5 nodes needing 3, two refusals leave three nodes that
// may still say yes, so the round stays open; the third refusal decides it.
// (Checks added for make mutate: docs/decisions/2026-12-06-mutation-testing.md.)
func TestOpenWhileTheMajorityIsPossible(t *testing.T) {
	for _, c := range []struct{ n, need int }{{5, 3}, {3, 2}, {4, 3}, {7, 4}} {
		r := newRound(t, c.n, c.need, false)
		for i := range c.n - c.need {
			r.Deliver(i, quorum.Reply{Outcome: quorum.Refused, Err: quorum.ErrRefused})
			if r.Decided() {
				t.Fatalf("%d of %d needed: decided after %d refusals, with %d nodes left to say yes", c.need, c.n, i+1, c.n-i-1)
			}
		}
		for i := c.n - c.need; i < c.n; i++ {
			r.Deliver(i, ok)
		}
		if !r.Decided() {
			t.Fatalf("%d of %d needed: not decided after every node answered", c.need, c.n)
		}
		if res := r.Wait(t.Context(), time.Hour); !res.Reached || res.OK != c.need {
			t.Fatalf("%d of %d needed: %+v, want reached with %d", c.need, c.n, res, c.need)
		}

		r = newRound(t, c.n, c.need, false)
		for i := range c.n - c.need + 1 {
			r.Deliver(i, quorum.Reply{Outcome: quorum.Failed, Err: errors.New("down")})
		}
		if !r.Decided() {
			t.Fatalf("%d of %d needed: not decided once %d nodes failed", c.need, c.n, c.n-c.need+1)
		}
	}
}

// A round is decided at its need, not one reply before or after.
func TestDecidedExactlyAtTheNeed(t *testing.T) {
	r := newRound(t, 5, 3, false)
	r.Deliver(0, ok)
	r.Deliver(1, ok)
	if r.Decided() {
		t.Fatal("decided with 2 of the 3 needed")
	}
	r.Deliver(2, ok)
	if !r.Decided() {
		t.Fatal("not decided with the 3 needed")
	}
}

// The timeout counts from the round's start, not from the call to Wait: a
// round that started longer ago than its timeout returns at once, its
// silent nodes TimedOut. The context only keeps a broken Wait from
// hanging the test; a correct one never reaches it.
func TestTimeoutCountsFromTheStart(t *testing.T) {
	r, err := quorum.NewRound(3, 2, false, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r.Deliver(0, ok)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res := r.Wait(ctx, time.Hour-time.Minute)
	if res.Err != nil || res.Reached || res.Count(quorum.TimedOut) != 2 || res.Replies[1].Latency != time.Hour-time.Minute {
		t.Fatalf("Wait: %+v, want the two silent nodes TimedOut at once", res)
	}
}

// Finish without a decision: an error makes the silent nodes Canceled with
// that error and their latency since the start; none makes them TimedOut
// at the timeout. A decided round reports no error.
func TestFinishNamesWhatEndedTheRound(t *testing.T) {
	start := time.Unix(1000, 0)
	r, err := quorum.NewRound(3, 2, false, start)
	if err != nil {
		t.Fatal(err)
	}
	r.Deliver(0, quorum.Reply{Outcome: quorum.OK, Latency: time.Millisecond})
	res := r.Finish(start.Add(7*time.Millisecond), time.Second, context.Canceled)
	if !errors.Is(res.Err, context.Canceled) || res.Count(quorum.Canceled) != 2 || res.Replies[2].Latency != 7*time.Millisecond || !errors.Is(res.Replies[1].Err, context.Canceled) {
		t.Fatalf("Finish with an error: %+v", res)
	}

	r, _ = quorum.NewRound(3, 2, false, start)
	r.Deliver(0, quorum.Reply{Outcome: quorum.OK, Latency: time.Millisecond})
	r.Deliver(1, quorum.Reply{Outcome: quorum.OK, Latency: time.Millisecond})
	res = r.Finish(start.Add(7*time.Millisecond), time.Second, context.Canceled)
	if res.Err != nil || !res.Reached || res.Replies[2].Outcome != quorum.Pending {
		t.Fatalf("Finish of a decided round: %+v, want no error and the third node Pending", res)
	}
}

// Every outcome has its name; a value past the last is printed as a number.
func TestEveryOutcomeNamed(t *testing.T) {
	want := map[quorum.Outcome]string{quorum.Pending: "pending", quorum.OK: "ok", quorum.Refused: "refused", quorum.Failed: "failed",
		quorum.TimedOut: "timed out", quorum.Unavailable: "unavailable", quorum.Canceled: "canceled", quorum.Canceled + 1: "outcome(7)"}
	for o, name := range want {
		if o.String() != name {
			t.Errorf("Outcome(%d).String() = %q, want %q", uint8(o), o.String(), name)
		}
	}
}

// Count counts each outcome once per node.
func TestCountPerOutcome(t *testing.T) {
	r := newRound(t, 4, 3, true)
	r.Deliver(0, ok)
	r.Deliver(1, quorum.Reply{Outcome: quorum.Refused})
	r.Deliver(2, quorum.Reply{Outcome: quorum.Refused})
	r.Deliver(3, ok)
	res := r.Wait(t.Context(), time.Hour)
	if res.Count(quorum.OK) != 2 || res.Count(quorum.Refused) != 2 || res.Count(quorum.Pending) != 0 || res.Reached {
		t.Fatalf("Wait: %+v", res)
	}
}
