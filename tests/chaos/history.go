package chaos

import (
	"slices"
	"sync"
	"time"
)

// Section is one critical section as the test process saw it. Enter is
// taken after Lock returned and the holder checked Lock.Valid(); Exit just
// before Unlock is called. Both are CLOCK_MONOTONIC nanoseconds (monoNow),
// shared by every process on the machine.
type Section struct {
	Client int `json:"client"`
	// Seq tells one client's sections apart; a write carries its section's.
	Seq      int64  `json:"seq"`
	Resource string `json:"resource"`
	Enter    int64  `json:"enter"`
	Exit     int64  `json:"exit"`
	Fence    uint64 `json:"fence"`
	// Late is true when the holder's deadline had passed by Exit: it acted
	// outside its lease (a pause, or a scheduling delay longer than TTL).
	Late bool `json:"late,omitempty"`
}

// Write is one fenced write to the resource Redis, as the writer saw it.
// Accepted and Stale are exclusive; neither means the write failed for
// another reason (Err), so its effect is unknown.
type Write struct {
	Client   int    `json:"client"`
	Seq      int64  `json:"seq"`
	Resource string `json:"resource"`
	Fence    uint64 `json:"fence"`
	// Owner is the writer's lock token: WriteFenced accepts an equal fence
	// only from the owner that wrote it.
	Owner    string `json:"owner"`
	Call     int64  `json:"call"`
	Return   int64  `json:"return"`
	Accepted bool   `json:"accepted,omitempty"`
	Stale    bool   `json:"stale,omitempty"` // rejected with redlock.ErrStaleFence
	Err      string `json:"err,omitempty"`
	// Unknown marks a write its client was killed during (a leader killed
	// in the election scenario): it may or may not have reached the
	// resource. Return is then math.MaxInt64.
	Unknown bool `json:"unknown,omitempty"`
}

// Acquire is one bounded Lock call: availability and latency come from
// these.
type Acquire struct {
	Client  int           `json:"client"`
	OK      bool          `json:"ok"`
	Latency time.Duration `json:"latency"`
	// Start is when the Lock call began (monoNow, as sections' instants).
	Start int64 `json:"start,omitempty"`
}

// History collects records from every client of a run; safe for concurrent
// use.
type History struct {
	mu       sync.Mutex
	sections []Section
	writes   []Write
	acquires []Acquire
}

func (h *History) addSection(s Section) {
	h.mu.Lock()
	h.sections = append(h.sections, s)
	h.mu.Unlock()
}

func (h *History) addWrite(w Write) {
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
}

func (h *History) addAcquire(a Acquire) {
	h.mu.Lock()
	h.acquires = append(h.acquires, a)
	h.mu.Unlock()
}

// Sections returns a copy of the sections recorded so far.
func (h *History) Sections() []Section {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sections)
}

// Writes returns a copy of the writes recorded so far.
func (h *History) Writes() []Write {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// Acquires returns a copy of the acquire attempts recorded so far.
func (h *History) Acquires() []Acquire {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.acquires)
}

// Len returns how many critical sections have been recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sections)
}
