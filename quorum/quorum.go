package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Errors reported in Reply.Err.
var (
	// ErrRefused is what a call wraps to say the node answered "no".
	ErrRefused = errors.New("quorum: refused")
	// ErrTimeout is the error of a call that did not answer by its deadline.
	ErrTimeout = errors.New("quorum: no answer before the node timeout")
	// ErrUnavailable is the error of a call that was not sent because the
	// node has not answered an earlier call yet.
	ErrUnavailable = errors.New("quorum: node unavailable: an earlier call is still unanswered")
	// ErrClosed is the error of calls made after Group.Close.
	ErrClosed = errors.New("quorum: group closed")
)

// Outcome is what became of the call to one node.
type Outcome uint8

// The outcomes of a call.
const (
	// Pending: the call had not finished when the round was decided.
	Pending Outcome = iota
	// OK: the call succeeded.
	OK
	// Refused: the node answered no (the call returned ErrRefused).
	Refused
	// Failed: the call returned another error in time.
	Failed
	// TimedOut: the call did not finish before its deadline.
	TimedOut
	// Unavailable: the call was not sent (the node is not answering, or the
	// group is closed).
	Unavailable
	// Canceled: the caller's context ended before the call finished.
	Canceled
)

var outcomeNames = [...]string{"pending", "ok", "refused", "failed", "timed out", "unavailable", "canceled"}

// String returns the outcome's name, e.g. "timed out".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Group is a fixed set of N nodes with their health, and the owner of every
// call made to them. Create it with NewGroup; it is safe for concurrent use.
type Group struct {
	timeout time.Duration
	nodes   []node

	mu     sync.Mutex // guards closed and wg.Add against Close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

// NewGroup returns a group of n nodes whose calls each get timeout.
func NewGroup(n int, timeout time.Duration) (*Group, error) {
	if n <= 0 {
		return nil, fmt.Errorf("quorum: need at least one node, got %d", n)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("quorum: node timeout %v must be positive", timeout)
	}
	return &Group{timeout: timeout, nodes: make([]node, n)}, nil
}

// Available reports whether node i currently accepts calls (it has not left
// a call unanswered past its deadline, or a probe may be sent).
func (g *Group) Available(i int) bool {
	if i < 0 || i >= len(g.nodes) {
		return false
	}
	nd := &g.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return !nd.down || (nd.overruns == 0 && !nd.probing)
}

// Close stops new calls (they fail with ErrClosed) and waits for every call
// and Late hook still running, including calls that overran their
// deadline. It returns nil; it exists to be deferred.
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
	return nil
}

// enter registers one unit of work with the group, unless it is closed.
func (g *Group) enter(units int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(units)
	return true
}

// Op describes one round: the call made to every node and when it is decided.
type Op[T any] struct {
	// Need is how many OK replies reach the quorum, in [1, N].
	Need int
	// WaitAll makes Run wait for every node (answer or deadline) instead
	// of returning at the decision. The decision is the same.
	WaitAll bool
	// Call is made once per node, concurrently, with a context that is
	// cancelled at the node deadline (cause ErrTimeout) or with the
	// caller's. Return an error wrapping ErrRefused for "no".
	Call func(ctx context.Context, node int) (T, error)
	// Late, if set, receives the reply of every call that finished after
	// Run stopped waiting for it (after the decision, or after its
	// deadline). It runs on a goroutine the group owns and joins, and must
	// itself be bounded.
	Late func(node int, rep Reply[T])
}

// Reply is what one node did in a round.
type Reply[T any] struct {
	Outcome Outcome
	Value   T
	Err     error
	// Latency is from the start of the round to the reply (or to the
	// deadline, for TimedOut).
	Latency time.Duration
}

// Result is the outcome of a round.
type Result[T any] struct {
	// Replies has one entry per node, by index.
	Replies []Reply[T]
	// Need is Op.Need; OK counts OK replies seen before Run returned.
	Need, OK int
	// Reached reports OK ≥ Need.
	Reached bool
	// Err is set when the round could not run or the caller's context
	// ended before the decision.
	Err error
}

// Count returns how many replies have outcome o.
func (r Result[T]) Count(o Outcome) int {
	c := 0
	for _, rep := range r.Replies {
		if rep.Outcome == o {
			c++
		}
	}
	return c
}

type msg[T any] struct {
	node int
	rep  Reply[T]
}

// round is the meeting point between Run and the calls it started.
type round[T any] struct {
	mu   sync.Mutex
	done bool
	ch   chan msg[T] // capacity N: each node delivers at most once
}

// deliver hands a reply to Run unless Run has stopped listening.
func (r *round[T]) deliver(m msg[T]) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.ch <- m
	return true
}

const (
	running int32 = iota
	finished
	overran
)

// Run makes op.Call on every node of g at once and returns as soon as the
// round is decided (or, with WaitAll, when every node answered or reached
// its deadline), or when ctx ends.
func Run[T any](ctx context.Context, g *Group, op Op[T]) Result[T] {
	n := len(g.nodes)
	res := Result[T]{Replies: make([]Reply[T], n), Need: op.Need}
	if op.Need < 1 || op.Need > n || op.Call == nil {
		res.Err = fmt.Errorf("quorum: need %d of %d nodes (and a call): not a valid round", op.Need, n)
		return res
	}
	// One unit for Run itself (so Late hooks it starts are covered), one per call.
	if !g.enter(1 + n) {
		for i := range res.Replies {
			res.Replies[i] = Reply[T]{Outcome: Unavailable, Err: ErrClosed}
		}
		res.Err = ErrClosed
		return res
	}
	defer g.wg.Done()

	r := &round[T]{ch: make(chan msg[T], n)}
	start := time.Now()
	waiting, failed := 0, 0
	for i := range g.nodes {
		nd := &g.nodes[i]
		probe, ok := nd.admit()
		if !ok {
			g.wg.Done()
			res.Replies[i] = Reply[T]{Outcome: Unavailable, Err: ErrUnavailable}
			failed++
			continue
		}
		waiting++
		go call(ctx, g, nd, r, op, i, probe, start)
	}

	decided := func() bool { return res.OK >= op.Need || failed > n-op.Need }
	for waiting > 0 && (op.WaitAll || !decided()) {
		select {
		case m := <-r.ch:
			waiting--
			res.Replies[m.node] = m.rep
			if m.rep.Outcome == OK {
				res.OK++
			} else {
				failed++
			}
		case <-ctx.Done():
			res.Err = ctx.Err()
			waiting = 0
		}
	}

	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	// Replies delivered after the loop stopped reading are late: they go
	// to the Late hook like any other.
	for {
		select {
		case m := <-r.ch:
			if op.Late != nil {
				g.wg.Add(1) // safe: Run's own unit keeps the counter above zero
				go func() {
					defer g.wg.Done()
					op.Late(m.node, m.rep)
				}()
			}
			continue
		default:
		}
		break
	}
	for i := range res.Replies {
		if res.Replies[i].Outcome == Pending && res.Err != nil {
			res.Replies[i].Outcome = Canceled
			res.Replies[i].Err = res.Err
		}
	}
	res.Reached = res.OK >= op.Need
	return res
}

// call runs on its own goroutine, owned by g.
func call[T any](ctx context.Context, g *Group, nd *node, r *round[T], op Op[T], i int, probe bool, start time.Time) {
	defer g.wg.Done()
	// One timer per call does both jobs: it cancels the call's context
	// (for clients that honour it) and marks the call overrun (for those
	// that do not). A context.WithTimeout would add a second timer.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var state atomic.Int32
	timer := time.AfterFunc(g.timeout, func() {
		cancel(ErrTimeout)
		if state.CompareAndSwap(running, overran) {
			nd.overrun()
			r.deliver(msg[T]{i, Reply[T]{Outcome: TimedOut, Err: ErrTimeout, Latency: time.Since(start)}})
		}
	})
	v, err := op.Call(cctx, i)
	lat := time.Since(start)
	timer.Stop()

	answered := err == nil || !(errors.Is(err, context.Canceled) && context.Cause(cctx) == ErrTimeout)
	if state.CompareAndSwap(running, finished) {
		nd.finish(probe, answered)
		rep := Reply[T]{Outcome: classify(err, answered), Value: v, Err: err, Latency: lat}
		if r.deliver(msg[T]{i, rep}) {
			return
		}
	} else {
		nd.finishLate(probe, err == nil || errors.Is(err, ErrRefused))
	}
	if op.Late != nil {
		op.Late(i, Reply[T]{Outcome: classify(err, true), Value: v, Err: err, Latency: lat})
	}
}

func classify(err error, answered bool) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrRefused):
		return Refused
	case !answered:
		return TimedOut
	case errors.Is(err, context.Canceled):
		return Canceled
	default:
		return Failed
	}
}

// node is the health of one node: a small breaker. It opens when a call
// overruns its deadline and closes when the node answers again; while it is
// open, at most one probe call is in flight.
type node struct {
	mu       sync.Mutex
	down     bool
	overruns int // calls past their deadline and still running
	probing  bool
}

func (n *node) admit() (probe, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.down {
		return false, true
	}
	if n.overruns == 0 && !n.probing {
		n.probing = true
		return true, true
	}
	return false, false
}

func (n *node) overrun() {
	n.mu.Lock()
	n.down = true
	n.overruns++
	n.mu.Unlock()
}

// finish records a call that finished before it was marked overrun. A call
// that returned because its context was cancelled at the deadline (a client
// that honours contexts) did not answer either.
func (n *node) finish(probe, answered bool) {
	n.mu.Lock()
	if probe {
		n.probing = false
	}
	n.down = !answered
	n.mu.Unlock()
}

// finishLate records a call that overran its deadline and has now returned.
func (n *node) finishLate(probe, answered bool) {
	n.mu.Lock()
	n.overruns--
	if probe {
		n.probing = false
	}
	if answered {
		n.down = false
	}
	n.mu.Unlock()
}
