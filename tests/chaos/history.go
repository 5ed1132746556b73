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
	// Lapsed: an election's leader-section its campaigner ended by letting
	// the leadership lapse (closing its Locker) instead of resigning.
	Lapsed bool `json:"lapsed,omitempty"`
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
	// Err is the error a failed call returned; Lost, whether it wraps
	// redlock.ErrLost (an election's Campaign whose leadership was lost
	// before a majority took its value).
	Err  string `json:"err,omitempty"`
	Lost bool   `json:"lost,omitempty"`
}

// Publication is a value a campaigner set out to publish: with Campaign
// (Term 0: not known before Campaign returns; its Leadership gives it) or
// with Proclaim (the leadership's Term).
type Publication struct {
	Client int    `json:"client"`
	Value  string `json:"value"`
	Term   uint64 `json:"term,omitempty"`
	At     int64  `json:"at"` // monoNow before the call
}

// Leadership is one successful Campaign: its term (the lock's fence) and
// the value Campaign published.
type Leadership struct {
	Client int    `json:"client"`
	Seq    int64  `json:"seq"`
	Term   uint64 `json:"term"`
	Value  string `json:"value"`
	At     int64  `json:"at"` // monoNow after Campaign returned
}

// Step is a subprocess leader's report before each fenced write: the
// parent completes the section and the write from it if it kills the
// leader (subClient.lastStep).
type Step struct {
	Client int    `json:"client"`
	Seq    int64  `json:"seq"`
	Term   uint64 `json:"term"`
	Owner  string `json:"owner"`
	Enter  int64  `json:"enter"`
	At     int64  `json:"at"`       // after lk.Err() was nil
	Dead   int64  `json:"deadline"` // lk.Deadline() then, as monoNow
}

// Delivery is one leader an observer's Observe delivered.
type Delivery struct {
	Observer int    `json:"observer"`
	Term     uint64 `json:"term"`
	Value    string `json:"value"`
	At       int64  `json:"at"`
}

// History collects records from every client of a run; safe for concurrent
// use.
type History struct {
	mu       sync.Mutex
	sections []Section
	writes   []Write
	acquires []Acquire
	// The election scenario's (election.go).
	pubs       []Publication
	leads      []Leadership
	deliveries []Delivery
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

func (h *History) addPublication(p Publication) {
	h.mu.Lock()
	h.pubs = append(h.pubs, p)
	h.mu.Unlock()
}

func (h *History) addLeadership(l Leadership) {
	h.mu.Lock()
	h.leads = append(h.leads, l)
	h.mu.Unlock()
}

func (h *History) addDelivery(d Delivery) {
	h.mu.Lock()
	h.deliveries = append(h.deliveries, d)
	h.mu.Unlock()
}

// Publications returns a copy of the values campaigners set out to publish.
func (h *History) Publications() []Publication {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pubs)
}

// Leaderships returns a copy of the leaderships recorded so far.
func (h *History) Leaderships() []Leadership {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.leads)
}

// Deliveries returns a copy of what observers were delivered.
func (h *History) Deliveries() []Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deliveries)
}

// Terms returns how many leaderships (successful Campaigns) were recorded.
func (h *History) Terms() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.leads)
}
