package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nodes scripts what each node does. A node listed in block ignores its
// context and returns only when the test releases it, like a go-redis call
// to a SIGSTOPped master.
type nodes struct {
	refuse  map[int]bool
	fail    map[int]bool
	block   map[int]chan struct{}
	calls   []atomic.Int32
	lateMu  sync.Mutex
	lateErr map[int]error
}

func newNodes(n int) *nodes {
	return &nodes{refuse: map[int]bool{}, fail: map[int]bool{}, block: map[int]chan struct{}{},
		calls: make([]atomic.Int32, n), lateErr: map[int]error{}}
}

// stall makes node i block. Call it after newGroup, so that the release
// (a cleanup) runs before the group's Close waits for the call.
func (s *nodes) stall(t *testing.T, i int) (release func()) {
	c := make(chan struct{})
	s.block[i] = c
	var once sync.Once
	release = func() { once.Do(func() { close(c) }) }
	t.Cleanup(release)
	return release
}

func (s *nodes) op(need int) quorum.Op[string] {
	return quorum.Op[string]{
		Need: need,
		Call: func(ctx context.Context, i int) (string, error) {
			s.calls[i].Add(1)
			if c, ok := s.block[i]; ok {
				<-c // deliberately ignores ctx
				return "late", nil
			}
			switch {
			case s.refuse[i]:
				return "", quorum.ErrRefused
			case s.fail[i]:
				return "", errors.New("boom")
			}
			return fmt.Sprint("v", i), nil
		},
		Late: func(i int, rep quorum.Reply[string]) {
			s.lateMu.Lock()
			defer s.lateMu.Unlock()
			s.lateErr[i] = rep.Err
		},
	}
}

func newGroup(t *testing.T, n int, timeout time.Duration) *quorum.Group {
	t.Helper()
	g, err := quorum.NewGroup(n, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func outcomes[T any](r quorum.Result[T]) []quorum.Outcome {
	var o []quorum.Outcome
	for _, rep := range r.Replies {
		o = append(o, rep.Outcome)
	}
	return o
}

func TestReachedWithoutWaitingForStalledNodes(t *testing.T) {
	s := newNodes(5)
	g := newGroup(t, 5, time.Hour)
	s.stall(t, 3)
	s.stall(t, 4)
	// An hour-long node timeout: if Run waited for the stalled nodes the
	// test would hang, so returning at all proves it decided early.
	r := quorum.Run(t.Context(), g, s.op(3))
	if !r.Reached || r.OK != 3 || r.Err != nil {
		t.Fatalf("Reached=%v OK=%d Err=%v, want reached with 3", r.Reached, r.OK, r.Err)
	}
	if got := outcomes(r)[3:]; got[0] != quorum.Pending || got[1] != quorum.Pending {
		t.Fatalf("stalled nodes: %v, want pending", got)
	}
	for i := range 3 {
		if r.Replies[i].Value != fmt.Sprint("v", i) {
			t.Errorf("node %d value %q", i, r.Replies[i].Value)
		}
	}
}

func TestFailsAsSoonAsMajorityImpossible(t *testing.T) {
	s := newNodes(5)
	s.refuse[0], s.fail[1], s.refuse[2] = true, true, true
	g := newGroup(t, 5, time.Hour)
	s.stall(t, 3)
	r := quorum.Run(t.Context(), g, s.op(3))
	if r.Reached {
		t.Fatal("reached with 3 of 5 refusing")
	}
	want := []quorum.Outcome{quorum.Refused, quorum.Failed, quorum.Refused}
	for i, o := range want {
		if r.Replies[i].Outcome != o {
			t.Errorf("node %d: %v, want %v", i, r.Replies[i].Outcome, o)
		}
	}
}

func TestDeadlineEnforcedAndBreakerOpens(t *testing.T) {
	s := newNodes(3)
	g := newGroup(t, 3, 20*time.Millisecond)
	release := s.stall(t, 2)
	op := s.op(3) // needs the stalled node
	r := quorum.Run(t.Context(), g, op)
	if r.Reached || r.Replies[2].Outcome != quorum.TimedOut || !errors.Is(r.Replies[2].Err, quorum.ErrTimeout) {
		t.Fatalf("got %v / %v, want node 2 timed out", outcomes(r), r.Replies[2].Err)
	}
	if g.Available(2) {
		t.Fatal("node 2 still available after overrunning its deadline")
	}
	// While the overrunning call is outstanding, node 2 gets no new call.
	r = quorum.Run(t.Context(), g, op)
	if r.Replies[2].Outcome != quorum.Unavailable || s.calls[2].Load() != 1 {
		t.Fatalf("second round: node 2 %v after %d calls, want unavailable after 1", r.Replies[2].Outcome, s.calls[2].Load())
	}
	// The stalled call returns: the Late hook sees it, and the node is back.
	release()
	waitFor(t, func() bool { return g.Available(2) })
	s.lateMu.Lock()
	_, late := s.lateErr[2]
	s.lateMu.Unlock()
	if !late {
		t.Fatal("Late hook did not see the overrunning call")
	}
	delete(s.block, 2)
	r = quorum.Run(t.Context(), g, op)
	if !r.Reached || s.calls[2].Load() != 2 {
		t.Fatalf("after recovery: %v, calls %d", outcomes(r), s.calls[2].Load())
	}
}

// A node that stalls while it is not needed must still trip its breaker, or
// calls to it pile up behind the stalled ones.
func TestOverrunCountedAfterDecision(t *testing.T) {
	s := newNodes(3)
	g := newGroup(t, 3, 10*time.Millisecond)
	s.stall(t, 2)
	r := quorum.Run(t.Context(), g, s.op(2))
	if !r.Reached || r.Replies[2].Outcome != quorum.Pending {
		t.Fatalf("got %v", outcomes(r))
	}
	waitFor(t, func() bool { return !g.Available(2) })
	for range 10 {
		quorum.Run(t.Context(), g, s.op(2))
	}
	if c := s.calls[2].Load(); c != 1 {
		t.Fatalf("stalled node received %d calls, want 1", c)
	}
}

func TestProbeAfterLateFailure(t *testing.T) {
	var calls atomic.Int32
	g := newGroup(t, 1, 10*time.Millisecond)
	c := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c) }) }
	t.Cleanup(release)
	op := quorum.Op[int]{Need: 1, Call: func(ctx context.Context, i int) (int, error) {
		if calls.Add(1) == 1 {
			<-c
			return 0, errors.New("i/o timeout")
		}
		return 1, nil
	}}
	if r := quorum.Run(t.Context(), g, op); r.Replies[0].Outcome != quorum.TimedOut {
		t.Fatalf("first: %v", outcomes(r))
	}
	release()
	// The late reply was an error, so the node stays down, but a single
	// probe is allowed once nothing is outstanding.
	waitFor(t, func() bool { return g.Available(0) })
	if r := quorum.Run(t.Context(), g, op); !r.Reached {
		t.Fatalf("probe: %v", outcomes(r))
	}
	if r := quorum.Run(t.Context(), g, op); !r.Reached || calls.Load() != 3 {
		t.Fatalf("after probe: %v, calls %d", outcomes(r), calls.Load())
	}
}

func TestWaitAllAndCanceled(t *testing.T) {
	s := newNodes(3)
	g := newGroup(t, 3, 20*time.Millisecond)
	g2 := newGroup(t, 2, time.Hour)
	s.stall(t, 2)
	op := s.op(1)
	op.WaitAll = true
	r := quorum.Run(t.Context(), g, op)
	if !r.Reached || r.Replies[2].Outcome != quorum.TimedOut || r.Count(quorum.OK) != 2 {
		t.Fatalf("WaitAll: %v", outcomes(r))
	}

	s2 := newNodes(2)
	s2.stall(t, 0)
	s2.stall(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r = quorum.Run(ctx, g2, s2.op(1))
	if !errors.Is(r.Err, context.Canceled) || r.Reached || r.Replies[0].Outcome != quorum.Canceled {
		t.Fatalf("canceled: Err=%v %v", r.Err, outcomes(r))
	}
}

func TestBadInputAndClose(t *testing.T) {
	if _, err := quorum.NewGroup(0, time.Second); err == nil {
		t.Error("NewGroup(0) succeeded")
	}
	if _, err := quorum.NewGroup(3, 0); err == nil {
		t.Error("NewGroup with zero timeout succeeded")
	}
	g := newGroup(t, 3, time.Second)
	s := newNodes(3)
	for _, need := range []int{0, 4, -1} {
		if r := quorum.Run(t.Context(), g, s.op(need)); r.Err == nil || r.Reached {
			t.Errorf("need %d: Err=%v Reached=%v", need, r.Err, r.Reached)
		}
	}
	release := s.stall(t, 0)
	g2, _ := quorum.NewGroup(3, 5*time.Millisecond)
	quorum.Run(t.Context(), g2, s.op(3))
	closed := make(chan struct{})
	go func() { g2.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a call was still running")
	default:
	}
	release()
	<-closed
	if r := quorum.Run(t.Context(), g2, s.op(1)); !errors.Is(r.Err, quorum.ErrClosed) || r.Replies[0].Outcome != quorum.Unavailable {
		t.Fatalf("after Close: %v %v", r.Err, outcomes(r))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
