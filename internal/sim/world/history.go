package world

import (
	"fmt"
	"math"
	"time"
)

// Never is the instant of what did not happen (a Done not closed, a call
// without a context limit).
const Never time.Duration = math.MaxInt64

// Mode is how a lock is held.
type Mode uint8

// The modes.
const (
	// Exclusive: a mutex, or a read-write lock's writer.
	Exclusive Mode = iota
	// Shared: a read-write lock's reader (any number at once, with no
	// Exclusive holder).
	Shared
	// Permit: one of a semaphore's k permits.
	Permit
)

var modeNames = [...]string{"exclusive", "shared", "permit"}

// String returns the mode's name, e.g. "shared".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Interval is one critical section on the global clock: from Enter (the
// Lock call returned the lock) to Exit (the holder called Unlock). Until
// Deadline the holder may act on the lock; Done is when the lock's Done
// channel closed (Never: it did not).
type Interval struct {
	Client   int
	Call     uint64
	Resource string
	Mode     Mode
	Fence    uint64
	Enter    time.Duration
	Exit     time.Duration
	Deadline time.Duration
	Done     time.Duration
	// Lineage: holders of one lock handed over by its token (Adopt)
	// share it (0: none).
	Lineage uint64
}

// End is when the holder stopped counting on the lock: the first of
// Exit, Deadline and Done.
func (iv Interval) End() time.Duration { return min(iv.Exit, iv.Deadline, iv.Done) }

// String describes iv on one line, for a report.
func (iv Interval) String() string {
	done := "never"
	if iv.Done != Never {
		done = iv.Done.String()
	}
	return fmt.Sprintf("client %d call %d %s %q fence %d [%v, %v] deadline %v done %s",
		iv.Client, iv.Call, iv.Mode, iv.Resource, iv.Fence, iv.Enter, iv.Exit, iv.Deadline, done)
}

// Call is one Lock call on the global clock.
type Call struct {
	Client   int
	Call     uint64
	Resource string
	Start    time.Duration
	// End is when it returned (Never: it had not when the run ended).
	End      time.Duration
	Acquired bool
	// Limit is when its context ended (Never: no limit).
	Limit time.Duration
}

// Outage is a span of global time in which Master was not reachable and
// stable for Client (Client −1: for every client; Master −1: no master,
// the client itself paused): its process stalled or restarting, or the
// client's connection to it stalled or cut. A pub/sub connection cut is
// no outage: it costs wakes, not the rounds.
type Outage struct {
	Client, Master int
	From, To       time.Duration
}

// Reading is a holder's reading of who holds its lock (an election's
// Leader), returned at At: Fence is the term it read.
type Reading struct {
	Interval int // index in History.Intervals
	At       time.Duration
	Fence    uint64
}

// Observation is a reading by a client that may hold nothing: how many
// permits of a semaphore are held (Mode Permit, Value the count), or who
// leads an election (Mode Exclusive, Value the term), asked at Start and
// answered at End. Observer names the sequence it belongs to (one
// Observe channel, one reader's Leader calls).
type Observation struct {
	Client     int
	Observer   uint64
	Resource   string
	Mode       Mode
	Start, End time.Duration
	Value      uint64
}

// Closing is a client's Shutdown or Close: when it returned, whether it
// was a Shutdown that returned nil (every lock released), the calls of the
// client still running then, and the commands it sent afterwards.
type Closing struct {
	Client     int
	At         time.Duration
	Shutdown   bool
	Released   bool
	Running    []uint64 // calls begun, not returned when it returned
	SentAfter  int      // commands sent to the masters after it returned
	FirstAfter time.Duration
}

// History is what a run recorded, on the global clock.
type History struct {
	Masters      int
	Intervals    []Interval
	Calls        []Call
	Outages      []Outage
	Readings     []Reading
	Observations []Observation
	Closings     []Closing
	// End is the last event's time.
	End time.Duration
}
