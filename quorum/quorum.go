package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors reported in Reply.Err.
var (
	// ErrRefused is what a reply wraps to say the node answered "no".
	ErrRefused = errors.New("quorum: refused")
	// ErrTimeout is the error of a node that did not answer by the round's
	// deadline.
	ErrTimeout = errors.New("quorum: no answer before the node timeout")
	// ErrUnavailable is the error of a node that was not asked: it has not
	// been answering.
	ErrUnavailable = errors.New("quorum: node unavailable: it has not answered for longer than the node timeout")
)

// Outcome is what became of the request to one node.
type Outcome uint8

// The outcomes of a request.
const (
	// Pending: no reply had come when the round was decided.
	Pending Outcome = iota
	// OK: the node said yes.
	OK
	// Refused: the node answered no.
	Refused
	// Failed: the node answered with an error, or the link to it failed.
	Failed
	// TimedOut: no reply by the round's deadline.
	TimedOut
	// Unavailable: the request was not sent (the node is not answering, or
	// the sender is closed).
	Unavailable
	// Canceled: the caller's context ended before the reply.
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

// Reply is what one node did in a round.
type Reply struct {
	Outcome Outcome
	// Value is the node's answer, when it carries one.
	Value uint64
	// Aux is a second value, for answers that carry two (Adopt's: the
	// PTTL in Value, the fence here).
	Aux uint64
	Err error
	// Latency is from the start of the round to the reply (or to the
	// deadline, for TimedOut).
	Latency time.Duration
}

// Result is the outcome of a round.
type Result struct {
	// Replies has one entry per node, by index.
	Replies []Reply
	// Need is the round's quorum; OK counts OK replies seen before Wait
	// returned.
	Need, OK int
	// Reached reports OK ≥ Need.
	Reached bool
	// Err is the context's error when it ended before the decision.
	Err error
}

// Count returns how many replies have outcome o.
func (r Result) Count(o Outcome) int {
	c := 0
	for _, rep := range r.Replies {
		if rep.Outcome == o {
			c++
		}
	}
	return c
}

// Round is one request to each of N nodes. Create it with NewRound, then
// for each node either Skip it or send the request and Deliver the reply;
// Wait blocks until the round is decided. It is safe for concurrent use.
type Round struct {
	start   time.Time
	need    int
	waitAll bool

	mu       sync.Mutex
	replies  []Reply
	ok, no   int  // OK, and anything else, so far
	open     int  // nodes neither skipped nor answered
	stopped  bool // Wait returned: later replies are late
	decided  chan struct{}
	isClosed bool // decided is closed
}

// NewRound starts a round of n nodes that needs need OK replies; with
// waitAll, Wait waits for every node (reply or deadline) instead of
// returning at the decision. start is the instant the round's latencies
// and deadline count from.
func NewRound(n, need int, waitAll bool, start time.Time) (*Round, error) {
	if n < 1 || need < 1 || need > n {
		return nil, fmt.Errorf("quorum: need %d of %d nodes: not a valid round", need, n)
	}
	return &Round{start: start, need: need, waitAll: waitAll, replies: make([]Reply, n), open: n, decided: make(chan struct{})}, nil
}

// Start is the instant the round counts from.
func (r *Round) Start() time.Time { return r.start }

// Skip records that node was not asked, with outcome o (Unavailable) and
// err.
func (r *Round) Skip(node int, o Outcome, err error) {
	r.Deliver(node, Reply{Outcome: o, Err: err})
}

// Deliver records node's reply, stamping its latency if it has none. It
// reports false when the round had already stopped waiting: the reply is
// late and not counted. A node's second reply is ignored.
func (r *Round) Deliver(node int, rep Reply) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	if node < 0 || node >= len(r.replies) || r.replies[node].Outcome != Pending {
		return true
	}
	if rep.Latency == 0 && rep.Outcome != Unavailable {
		rep.Latency = time.Since(r.start)
	}
	r.replies[node] = rep
	r.open--
	if rep.Outcome == OK {
		r.ok++
	} else {
		r.no++
	}
	if !r.isClosed && (r.open == 0 || !r.waitAll && (r.ok >= r.need || r.no > len(r.replies)-r.need)) {
		r.isClosed = true
		close(r.decided)
	}
	return true
}

// Decided reports whether the round is decided: Wait would return at
// once. A driver that does not block (a simulator) checks it after each
// Deliver, and calls Finish once it is, or once its deadline or its
// context has come.
func (r *Round) Decided() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isClosed
}

// Wait blocks until the round is decided, timeout has passed since its
// start (nodes that have not answered become TimedOut), or ctx ends (they
// become Canceled, and Result.Err is ctx's error). It uses one timer, and
// none when the round is already decided. Call it (or Finish) once.
func (r *Round) Wait(ctx context.Context, timeout time.Duration) Result {
	var err error
	select {
	case <-r.decided:
	default:
		t := getTimer(timeout - time.Since(r.start))
		select {
		case <-r.decided:
		case <-t.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
		putTimer(t)
	}
	return r.Finish(time.Now(), timeout, err)
}

// timers are Wait's, kept for the next round, so that a round allocates
// no timer: stopped, and drained of a tick it was not read for (a program
// on the timers of Go before 1.23, asynctimerchan=1, could find one there
// later), a timer is reset and used again.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	timers.Put(t)
}

// Finish ends the round at now without waiting: what Wait returns once
// the round is decided, its timeout has passed (err nil: the nodes that
// have not answered become TimedOut), or its context ended with err (they
// become Canceled). A decided round ignores err. Call it (or Wait) once.
func (r *Round) Finish(now time.Time, timeout time.Duration, err error) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	res := Result{Replies: r.replies, Need: r.need, OK: r.ok, Reached: r.ok >= r.need, Err: err}
	if r.isClosed {
		// Decided: a context that ended at the same moment changes nothing.
		res.Err = nil
	}
	for i := range res.Replies {
		if res.Replies[i].Outcome != Pending {
			continue
		}
		switch {
		case r.isClosed:
			// Decided without this node: it stays Pending.
		case err != nil:
			res.Replies[i] = Reply{Outcome: Canceled, Err: err, Latency: now.Sub(r.start)}
		default:
			res.Replies[i] = Reply{Outcome: TimedOut, Err: ErrTimeout, Latency: timeout}
		}
	}
	return res
}
