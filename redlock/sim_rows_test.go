package redlock

import (
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

// The simulator's rows. Inside the assumptions (docs/design.md §3) a run
// must show no violation; each row outside breaks one on purpose and
// must show one.

// simTTL is the rows' lease: short, so that expiries, the waits on them
// and the masters' restarts happen often in simulated time.
const simTTL = time.Second

func simMutex() simConfig {
	return simConfig{opts: Options{TTL: simTTL, SafetyMargin: 300 * time.Millisecond}, resources: []string{"a", "b"}, callers: 2,
		hold: 5 * time.Millisecond, think: time.Millisecond}
}

// simFaults are the faults inside the assumptions.
var simFaults = world.Chaos{
	Every: 50 * time.Millisecond,
	Kinds: []world.FaultKind{world.StallConn, world.CutConn, world.CutPubSub, world.StallMaster, world.RestartMaster, world.PauseClient},
	For:   world.Dist{Min: time.Millisecond, Mean: 30 * time.Millisecond, Max: 300 * time.Millisecond},
	Keep:  0.5,
	// A master restarted empty stays down a TTL, and the drift on it.
	EmptyDown: simTTL + simTTL/100 + time.Millisecond,
}

func simRows() []*simRow {
	lossy := func(o *world.Options) { o.PubSubLoss, o.PubSubDup = 0.02, 0.02 }
	return []*simRow{
		{name: "mutex", procs: 3, cfg: simMutex(), world: lossy},
		{name: "mutex-faults", procs: 3, cfg: simMutex(), world: lossy, chaos: &simFaults},
	}
}
