package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/quorum"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRound(t *testing.T, n, need int, waitAll bool) *quorum.Round {
	t.Helper()
	r, err := quorum.NewRound(n, need, waitAll, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ok = quorum.Reply{Outcome: quorum.OK}

// The round is decided at the majority; the nodes that have not answered
// stay Pending, and their replies are late.
func TestDecidedAtTheMajority(t *testing.T) {
	r := newRound(t, 5, 3, false)
	for _, i := range []int{0, 2, 4} {
		if !r.Deliver(i, quorum.Reply{Outcome: quorum.OK, Value: uint64(i)}) {
			t.Fatalf("reply %d reported late", i)
		}
	}
	start := time.Now()
	res := r.Wait(t.Context(), time.Hour)
	if time.Since(start) > time.Second || !res.Reached || res.OK != 3 || res.Err != nil {
		t.Fatalf("Wait: %+v after %v", res, time.Since(start))
	}
	if res.Replies[4].Value != 4 || res.Replies[1].Outcome != quorum.Pending || res.Count(quorum.Pending) != 2 {
		t.Fatalf("replies: %+v", res.Replies)
	}
	if r.Deliver(1, ok) {
		t.Fatal("a reply after Wait returned was counted")
	}
}

func TestFailsAsSoonAsTheMajorityIsImpossible(t *testing.T) {
	r := newRound(t, 5, 3, false)
	r.Deliver(0, quorum.Reply{Outcome: quorum.Refused, Err: quorum.ErrRefused})
	r.Skip(1, quorum.Unavailable, quorum.ErrUnavailable)
	r.Deliver(2, quorum.Reply{Outcome: quorum.Failed, Err: errors.New("boom")})
	res := r.Wait(t.Context(), time.Hour)
	if res.Reached || res.Count(quorum.Pending) != 2 || res.Count(quorum.Unavailable) != 1 || res.Replies[1].Latency != 0 {
		t.Fatalf("Wait: %+v", res)
	}
}

// Nodes that do not answer become TimedOut at the round's deadline, with
// one timer for the whole round.
func TestDeadline(t *testing.T) {
	r := newRound(t, 3, 2, false)
	r.Deliver(0, ok)
	const timeout = 30 * time.Millisecond
	start := time.Now()
	res := r.Wait(t.Context(), timeout)
	if took := time.Since(start); took < timeout-5*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the deadline", took)
	}
	if res.Reached || res.Count(quorum.TimedOut) != 2 || !errors.Is(res.Replies[1].Err, quorum.ErrTimeout) || res.Replies[2].Latency != timeout {
		t.Fatalf("Wait: %+v", res)
	}
}

func TestWaitAllAndDuplicates(t *testing.T) {
	r := newRound(t, 3, 2, true)
	r.Deliver(0, ok)
	r.Deliver(1, ok)
	r.Deliver(1, quorum.Reply{Outcome: quorum.Failed}) // a second reply from node 1 is ignored
	done := make(chan quorum.Result)
	go func() { done <- r.Wait(context.Background(), time.Hour) }()
	select {
	case res := <-done:
		t.Fatalf("returned before every node answered: %+v", res)
	case <-time.After(20 * time.Millisecond):
	}
	r.Deliver(2, quorum.Reply{Outcome: quorum.Refused})
	res := <-done
	if res.OK != 2 || res.Replies[1].Outcome != quorum.OK || res.Replies[2].Outcome != quorum.Refused {
		t.Fatalf("Wait: %+v", res)
	}
}

func TestCanceled(t *testing.T) {
	r := newRound(t, 3, 2, false)
	r.Deliver(0, ok)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(10*time.Millisecond, cancel)
	res := r.Wait(ctx, time.Hour)
	if !errors.Is(res.Err, context.Canceled) || res.Count(quorum.Canceled) != 2 || res.Replies[0].Outcome != quorum.OK {
		t.Fatalf("Wait: %+v", res)
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {3, 0}, {3, 4}, {-1, 1}} {
		if _, err := quorum.NewRound(c[0], c[1], false, time.Now()); err == nil {
			t.Errorf("NewRound(%d nodes, need %d) succeeded", c[0], c[1])
		}
	}
	r := newRound(t, 2, 1, false)
	if !r.Deliver(7, ok) || !r.Deliver(-1, ok) {
		t.Fatal("out-of-range nodes must be ignored, not reported late")
	}
	r.Deliver(1, ok)
	if res := r.Wait(t.Context(), time.Hour); res.OK != 1 {
		t.Fatalf("Wait: %+v", res)
	}
}

func TestOutcomeNames(t *testing.T) {
	if quorum.TimedOut.String() != "timed out" || quorum.Outcome(42).String() != "outcome(42)" {
		t.Fatal(quorum.TimedOut.String(), quorum.Outcome(42).String())
	}
}
