package redlock

import (
	"context"
	"sync"

	"github.com/quorumlab/redlock/quorum"
)

// holding is what one acquisition's calls know about each master, so that
// every master that may hold the key is released exactly once, and never
// by a delete that could run before the SET it is meant to undo:
//
//   - SET never sent (the master was not answering), or refused: nothing
//     to release.
//   - SET answered before the round decided: the release round deletes.
//   - SET still in flight when the lock is given up: the release round
//     waits for its reply (up to NodeTimeout) and then deletes. A delete
//     sent while the SET is in flight on another connection could run
//     first and leave the key behind. If the wait times out, the SET's late
//     reply deletes, and the janitor retries as well.
type holding struct {
	mu      sync.Mutex
	phase   int    // deciding, held, gone
	arrived []bool // the SET's reply came back
	none    []bool // the SET was never sent, or refused: no key of ours

	flying  []chan struct{} // closed when an outstanding SET's reply arrives
	waiting []bool          // a release round is waiting on flying[i]
}

const (
	deciding = iota
	held
	gone
)

func newHolding(n int) *holding {
	return &holding{arrived: make([]bool, n), none: make([]bool, n), flying: make([]chan struct{}, n), waiting: make([]bool, n)}
}

// decided records what the round left outstanding.
func decided[T any](h *holding, res quorum.Result[T]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range res.Replies {
		switch r.Outcome {
		case quorum.Pending, quorum.TimedOut, quorum.Canceled:
			if !h.arrived[i] { // its late reply may already have come
				h.flying[i] = make(chan struct{})
			}
		case quorum.Unavailable, quorum.Refused:
			h.none[i] = true
			h.arrived[i] = r.Outcome == quorum.Refused
		default:
			h.arrived[i] = true
		}
	}
}

// settle records the lock's phase.
func (h *holding) settle(phase int) {
	h.mu.Lock()
	h.phase = phase
	h.mu.Unlock()
}

// landed records a late SET reply from master i (refused: the master said
// no). It reports whether the reply's owner must delete the key there
// itself: the lock is gone, the SET was not refused, and no release round
// is waiting to do it.
func (h *holding) landed(i int, refused bool) (mustRelease bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived[i] = true
	h.none[i] = refused
	w := h.flying[i]
	if w == nil {
		// It came back before decided() ran: the release round sees it
		// as answered and deletes (the lock cannot be gone yet).
		return false
	}
	close(w)
	h.flying[i] = nil
	return h.phase == gone && !h.waiting[i] && !refused
}

type setState int

const (
	setLanded      setState = iota // answered: delete now
	setNone                        // never sent, or refused: nothing to delete
	setStillFlying                 // ctx ended first: the late reply deletes
)

// awaitSet returns once the SET to master i is no longer in flight, or
// ctx ends.
func (h *holding) awaitSet(ctx context.Context, i int) setState {
	h.mu.Lock()
	w := h.flying[i]
	if w == nil {
		defer h.mu.Unlock()
		if h.none[i] {
			return setNone
		}
		return setLanded
	}
	h.waiting[i] = true
	h.mu.Unlock()
	select {
	case <-w:
		h.mu.Lock()
		defer h.mu.Unlock()
		h.waiting[i] = false
		if h.none[i] {
			return setNone
		}
		return setLanded
	case <-ctx.Done():
		// Out of time. If the reply lands from now on, its hook deletes;
		// if it landed just now, its hook left the delete to us, and the
		// janitor delivers it (the caller reports this master undelivered).
		h.mu.Lock()
		h.waiting[i] = false
		h.mu.Unlock()
		return setStillFlying
	}
}
