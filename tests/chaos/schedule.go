package chaos

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind names a fault.
type Kind string

// The faults a schedule can hold.
const (
	// PauseMasters SIGSTOPs Masters for Dur, then SIGCONTs them.
	PauseMasters Kind = "pause"
	// KillDelayed kills Masters, waits Dur (≥ TTL: the Redlock spec's
	// delayed restart), and restarts them empty.
	KillDelayed Kind = "kill+delayed-restart"
	// RestartEmpty kills Masters and restarts them empty at once, while
	// holders may still count on their keys: outside the assumptions.
	RestartEmpty Kind = "restart-empty"
	// Latency adds Delta each way to Masters for Dur (through the proxy).
	Latency Kind = "latency"
	// Cut partitions Masters (through the proxy) for Dur.
	Cut Kind = "cut"
	// JumpClock SIMULATES a forward jump of Delta on Masters' clocks: each
	// key's remaining TTL shrinks by Delta (lab.Masters.JumpClock).
	JumpClock Kind = "clock-jump(sim)"
	// PauseClient SIGSTOPs subprocess client Client for Dur, at its next
	// entry into a critical section, then SIGCONTs it.
	PauseClient Kind = "client-pause"
)

// Fault is one episode of a schedule: applied At after the run starts,
// undone Dur later (kinds that last).
type Fault struct {
	At      time.Duration `json:"at"`
	Kind    Kind          `json:"kind"`
	Masters []int         `json:"masters,omitempty"`
	Client  int           `json:"client,omitempty"`
	Dur     time.Duration `json:"dur,omitempty"`
	Delta   time.Duration `json:"delta,omitempty"`
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%v %s", f.At.Round(time.Millisecond), f.Kind)
	if f.Kind == PauseClient {
		fmt.Fprintf(&b, " client=%d", f.Client)
	} else {
		fmt.Fprintf(&b, " masters=%v", f.Masters)
	}
	if f.Delta > 0 {
		fmt.Fprintf(&b, " Δ=%v", f.Delta)
	}
	if f.Dur > 0 {
		fmt.Fprintf(&b, " for %v", f.Dur)
	}
	return b.String()
}

// Plan is what a schedule is drawn from.
type Plan struct {
	Kinds         []Kind
	Masters       int           // N
	MaxFaulted    int           // most masters one episode touches
	Clients       int           // subprocess clients (PauseClient)
	TTL           time.Duration // sets durations: pauses, delays, jumps
	MasterTimeout time.Duration // latency stays below it (RTT = 2Δ < MasterTimeout)
	Length        time.Duration // schedule span
}

// ScheduleRand returns the generator a scenario's schedule is drawn from:
// PCG seeded with the run's seed and the scenario's name, so every
// scenario has its own stream and a run is replayed by its seed alone.
func ScheduleRand(seed uint64, scenario string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(scenario))
	return rand.New(rand.NewPCG(seed, seed^h.Sum64()))
}

// NewSchedule draws a sequence of non-overlapping fault episodes from r:
// each one is undone before the next starts, so at most MaxFaulted masters
// are faulted at any time.
func NewSchedule(r *rand.Rand, p Plan) []Fault {
	var out []Fault
	gap := func() time.Duration { return p.TTL/2 + time.Duration(r.Int64N(int64(p.TTL))) }
	for at := gap(); at < p.Length; {
		f := Fault{At: at, Kind: p.Kinds[r.IntN(len(p.Kinds))]}
		if f.Kind == PauseClient {
			f.Client = r.IntN(max(p.Clients, 1))
		} else {
			k := 1 + r.IntN(p.MaxFaulted)
			f.Masters = r.Perm(p.Masters)[:k]
			slices.Sort(f.Masters)
		}
		switch f.Kind {
		case PauseMasters, Cut:
			f.Dur = p.TTL/2 + time.Duration(r.Int64N(int64(2*p.TTL)))
		case KillDelayed:
			// The spec: stay down at least the max TTL before rejoining.
			f.Dur = p.TTL + p.TTL/5 + time.Duration(r.Int64N(int64(p.TTL)))
		case Latency:
			f.Delta = time.Millisecond + time.Duration(r.Int64N(int64(p.MasterTimeout/2-p.MasterTimeout/5)))
			f.Dur = p.TTL + time.Duration(r.Int64N(int64(2*p.TTL)))
		case JumpClock:
			f.Delta = p.TTL/2 + time.Duration(r.Int64N(int64(p.TTL)))
		case PauseClient:
			f.Dur = 2*p.TTL + time.Duration(r.Int64N(int64(p.TTL)))
		}
		out = append(out, f)
		at += f.Dur + gap()
	}
	return out
}
