package redlock

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// paceSamples is how many recent round times the keeper's pacing looks at:
// enough for a p99 that one slow round moves at once (with 128 samples
// the p99 is the second largest), few enough to forget a slow spell within
// a few dozen extensions.
const paceSamples = 128

// paceRounds is how many p99 rounds of time the keeper keeps in hand when
// it extends (docs/design.md §8): the extension itself, a retry after it
// fails, and the wait between them.
const paceRounds = 3

// pace records how long the rounds that take and keep locks take on this
// Locker (acquisitions of kept locks, and the keeper's extensions), so the
// keeper can extend earlier when the masters are slow.
type pace struct {
	masters []roundTimes // each master's answer times, by index (Stats)

	mu   sync.Mutex
	ring [paceSamples]time.Duration
	n    int // samples recorded, ever
}

// record notes one round's time.
func (p *pace) record(d time.Duration) {
	p.mu.Lock()
	p.ring[p.n%paceSamples] = d
	p.n++
	p.mu.Unlock()
}

// p99 is the 99th percentile of the recent round times (0 before any).
func (p *pace) p99() time.Duration {
	p.mu.Lock()
	k := min(p.n, paceSamples)
	s := make([]time.Duration, k)
	copy(s, p.ring[:k])
	p.mu.Unlock()
	if k == 0 {
		return 0
	}
	slices.Sort(s)
	return s[(k*99+99)/100-1] // the ⌈0.99k⌉-th smallest
}

// lead is how much of a lock's window w should be left when the keeper
// extends it: a third of the window, or paceRounds times the recent p99
// round time when that is more.
func (p *pace) lead(w time.Duration) time.Duration {
	return max(w/3, paceRounds*p.p99())
}

// roundTimes is one master's recent answer times: a ring written without
// a lock, since every round writes it (a reader may see a slot mid-round:
// a recent time either way).
type roundTimes struct {
	n    atomic.Uint64
	ring [paceSamples]atomic.Int64
}

func (m *roundTimes) record(d time.Duration) {
	m.ring[(m.n.Add(1)-1)%paceSamples].Store(int64(d))
}

// quantiles returns the median and the 99th percentile (0, 0 before any).
func (m *roundTimes) quantiles() (p50, p99 time.Duration) {
	k := int(min(m.n.Load(), paceSamples))
	if k == 0 {
		return 0, 0
	}
	s := make([]time.Duration, k)
	for i := range s {
		s[i] = time.Duration(m.ring[i].Load())
	}
	slices.Sort(s)
	return s[(k+1)/2-1], s[(k*99+99)/100-1]
}

// observe records each master's answer time in a round: the masters that
// answered (yes or no), not those that timed out or were skipped.
func (p *pace) observe(res quorum.Result) {
	for i, r := range res.Replies {
		if (r.Outcome == quorum.OK || r.Outcome == quorum.Refused) && i < len(p.masters) {
			p.masters[i].record(r.Latency)
		}
	}
}
