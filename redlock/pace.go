package redlock

import (
	"slices"
	"sync"
	"time"
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
