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

// simElection is the election rows: a mutex's workload as campaigns.
func simElection() simConfig {
	c := simMutex()
	c.opts.Fencing, c.election = true, true
	return c
}

// simEdge is the rows that hold each lock to the last safe instant: a
// short TTL, one resource, each holder acting until its deadline and then
// stalling for the SafetyMargin (assumption 4's longest pause), and a
// poller per process that takes the key the moment it is free.
func simEdge() simConfig {
	return simConfig{opts: Options{TTL: 100 * time.Millisecond, SafetyMargin: 20 * time.Millisecond},
		resources: []string{"a"}, callers: 1, pollers: 1, think: time.Millisecond, toDeadline: true, acts: true,
		stall: 20 * time.Millisecond}
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

// simFaultsKept are simFaults whose restarts keep the keyspace: fencing
// also assumes that no counter is lost (docs/design.md §5, assumption 5).
var simFaultsKept = func() world.Chaos {
	c := simFaults
	c.Keep = 1
	return c
}()

// simRestartsEmpty restart masters empty, each down for a TTL: inside
// the assumptions of a lock, outside fencing's.
var simRestartsEmpty = world.Chaos{
	Every:     20 * time.Millisecond,
	Kinds:     []world.FaultKind{world.RestartMaster},
	For:       world.Dist{Min: time.Millisecond, Mean: 2 * time.Millisecond, Max: 5 * time.Millisecond},
	EmptyDown: simTTL + simTTL/100 + time.Millisecond,
}

// simEdgeFaults are the faults inside the assumptions of the edge rows:
// pauses within their SafetyMargin, restarts empty down for a TTL.
var simEdgeFaults = world.Chaos{
	Every:     20 * time.Millisecond,
	Kinds:     []world.FaultKind{world.StallConn, world.CutConn, world.CutPubSub, world.StallMaster, world.RestartMaster, world.PauseClient},
	For:       world.Dist{Min: time.Millisecond, Mean: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	Keep:      0.5,
	EmptyDown: 102 * time.Millisecond,
}

// simRestartsAtOnce restart masters empty and bring them back at once.
var simRestartsAtOnce = world.Chaos{
	Every: 5 * time.Millisecond,
	Kinds: []world.FaultKind{world.RestartMaster},
	For:   world.Dist{Min: time.Millisecond, Mean: 2 * time.Millisecond, Max: 5 * time.Millisecond},
}

// simKept is the rows that keep every lock (Do's fn or Keep) for up to
// three TTLs, so that the keeper's extensions, batched and alone, carry
// each section, and its loss timer ends those it cannot carry.
func simKept(c simConfig) simConfig {
	c.keep, c.keepHold = 1, 3*c.opts.TTL
	return c
}

func simRows() []*simRow {
	lossy := func(o *world.Options) { o.PubSubLoss, o.PubSubDup = 0.02, 0.02 }
	// Clocks whose rates differ by up to 0.8 %, inside the default
	// DriftFactor of 1 %.
	drifting := func(o *world.Options) { lossy(o); o.Drift = 0.004 }
	// Messages that take 2 ms on average and up to 20: one release runs
	// on the masters, and its grants reach the waiter, far apart (so a
	// give-back races the grants of the token it gives back, §14.3), and
	// a round can outlast a short extension's window.
	slowly := world.Dist{Min: 50 * time.Microsecond, Mean: 2 * time.Millisecond, Max: 20 * time.Millisecond}
	return []*simRow{
		{name: "mutex", procs: 3, cfg: simMutex(), world: lossy},
		{name: "mutex-faults", procs: 3, cfg: simMutex(), world: lossy, chaos: &simFaults},
		swarmRow(),
		{name: "kept", procs: 3, cfg: simKept(simMutex()), world: lossy},
		{name: "kept-faults", procs: 3, cfg: simKept(simMutex()), world: lossy, chaos: &simFaults},
		{name: "kept-slow", procs: 3, cfg: simKept(simMutex()), world: func(o *world.Options) { lossy(o); o.Delay = slowly }, chaos: &simFaults},
		{name: "mutex-slow", procs: 3, cfg: simMutex(), world: func(o *world.Options) { lossy(o); o.Delay = slowly }},
		// An even number of masters: a majority of 4 is 3.
		{name: "mutex-4", procs: 3, cfg: simMutex(), world: func(o *world.Options) { lossy(o); o.Masters = 4 }, chaos: &simFaults, oneSeedIn: 2},
		// A DriftFactor of 5 % and clocks whose rates differ by up to 4.9 %,
		// so that the drift term is what keeps a holder at its deadline
		// safe (with the default 1 % and 0.8 %, a window without it was
		// never caught in a minute of this row); and announcements of
		// 4 ms on average (up to 40), so that a handed lock's start at
		// since(G), not at its grants' arrival, is too.
		{name: "edge", procs: 3, cfg: func() simConfig {
			c := simEdge()
			c.opts.DriftFactor = 0.05
			return c
		}(), world: func(o *world.Options) {
			lossy(o)
			o.Drift, o.PubSubDelay = 0.024, world.Dist{Min: 50 * time.Microsecond, Mean: 4 * time.Millisecond, Max: 40 * time.Millisecond}
		}, oneSeedIn: 16},
		// The faults' pauses are the holders' stalls.
		{name: "edge-faults", procs: 3, cfg: func() simConfig {
			c := simEdge()
			c.stall = 0
			return c
		}(), world: drifting, chaos: &simEdgeFaults, oneSeedIn: 8},
		// Slow messages, and holders that extend a MasterTimeout before
		// their deadline with a TTL just long enough for a window (26 to
		// 28 ms: 3.7 to 5.7 ms), which a round often outlasts.
		{name: "edge-slow", procs: 3, cfg: func() simConfig {
			c := simEdge()
			c.opts.MasterTimeout = 25 * time.Millisecond
			c.extendTTL = [2]time.Duration{26 * time.Millisecond, 28 * time.Millisecond}
			return c
		}(), world: func(o *world.Options) { drifting(o); o.Delay = slowly }, oneSeedIn: 4},
		{name: "fenced", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.opts.Fencing = true
			return c
		}(), world: lossy, chaos: &simFaultsKept, oneSeedIn: 2},
		{name: "extend", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.extend, c.hold = true, 20*time.Millisecond
			return c
		}(), world: lossy, chaos: &simFaults, oneSeedIn: 2},
		{name: "semaphore", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.permits, c.callers = 2, 3
			return c
		}(), world: lossy, chaos: &simFaults, oneSeedIn: 2},
		{name: "rwmutex", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.readers = 0.7
			return c
		}(), world: lossy, chaos: &simFaults, oneSeedIn: 2},
		// Elections: campaigns, readings of the leader, resignations.
		{name: "election", procs: 3, cfg: simElection(), world: lossy, chaos: &simFaultsKept, oneSeedIn: 2},
		// The rest of the surface (sim_surface_test.go), which the swarm
		// draws too, in rows of their own so that each short run makes
		// every call: hand-overs and adoptions, and locks on several of 3
		// resources, fenced; Holders readers; Leader readers and
		// observers; and in each, processes that end by Shutdown or Close
		// at a drawn instant (in surface-kept, every process, its locks
		// kept). Liveness is not judged with hand-overs and locks on
		// several resources: its bound counts neither.
		{name: "surface-mutex", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.opts.Fencing, c.resources, c.adopt, c.multi, c.shut = true, []string{"a", "b", "c"}, 0.3, 0.3, 0.5
			c.extend, c.extendDrawn, c.hold = true, true, 20*time.Millisecond // extended and adopted locks: keys of unequal lives
			return c
		}(), world: func(o *world.Options) {
			// A heavy tail (one message in a hundred up to 60 ms, past
			// MasterTimeout): an extension that reaches a minority late
			// leaves its keys there longer than on the others, as a
			// congested link does, when the lock is adopted.
			lossy(o)
			o.Delay = world.Dist{Min: 50 * time.Microsecond, Mean: time.Millisecond, Max: 60 * time.Millisecond, Tail: 0.01}
		}, chaos: &simFaultsKept, oneSeedIn: 4, noLiveness: true},
		{name: "surface-semaphore", procs: 3, cfg: func() simConfig {
			c := simMutex()
			c.permits, c.callers, c.watch, c.shut = 2, 3, 0.3, 0.5
			return c
		}(), world: func(o *world.Options) {
			// Messages within half the MasterTimeout (10 ms): each
			// reading of the holders is judged (world.Holders).
			lossy(o)
			o.Delay = world.Dist{Min: 50 * time.Microsecond, Mean: 150 * time.Microsecond, Max: 2 * time.Millisecond}
		}, oneSeedIn: 4},
		{name: "surface-election", procs: 3, cfg: func() simConfig {
			c := simElection()
			c.watch, c.observe, c.shut = 0.3, true, 0.5
			return c
		}(), world: lossy, chaos: &simFaultsKept, oneSeedIn: 4},
		{name: "surface-kept", procs: 3, cfg: func() simConfig {
			c := simKept(simMutex())
			c.shut = 1
			return c
		}(), world: lossy, chaos: &simFaults, oneSeedIn: 4},
		// The fault lab's rows (tests/chaos, on containers): its
		// workload and time scale, handed and fenced, with its faults;
		// and handed without faults, where callers that do not queue
		// release the key every few milliseconds.
		{name: "lab-calm", procs: 5, cfg: simLab(false), span: 10 * time.Second, oneSeedIn: 4},
		// In the rows with the lab's faults, a process in two closes
		// without waiting for stalled masters (simConfig.closeEarly).
		{name: "lab-handed", procs: 5, cfg: closingEarly(simLab(false)), labFaults: true, span: 10 * time.Second, oneSeedIn: 4},
		{name: "lab-fenced", procs: 5, cfg: closingEarly(simLab(true)), labFaults: true, span: 10 * time.Second, oneSeedIn: 4},
		// Outside the assumptions: each must show a violation.
		{name: "restart-empty-at-once", procs: 3, cfg: simEdge(), breaksAssumption: true, chaos: &simRestartsAtOnce,
			world: func(o *world.Options) { o.Outside.RestartEmptyAtOnce = true }},
		{name: "drift-beyond", procs: 3, cfg: simEdge(), breaksAssumption: true,
			world: func(o *world.Options) { o.Drift, o.Outside.DriftBeyond = 0.2, true }},
		{name: "pause-past-margin", procs: 3, breaksAssumption: true, cfg: func() simConfig {
			c := simEdge()
			c.stall = 60 * time.Millisecond
			return c
		}()},
		{name: "fenced-restart-empty", procs: 3, breaksAssumption: true, chaos: &simRestartsEmpty, cfg: func() simConfig {
			c := simMutex()
			c.opts.Fencing = true
			return c
		}()},
		// An election whose masters restart empty: terms repeat.
		{name: "election-restart-empty", procs: 3, breaksAssumption: true, chaos: &simRestartsEmpty, cfg: simElection()},
		// An election whose masters restart empty and come back at once:
		// its Leader readers and observers read terms that go back.
		{name: "election-restart-at-once", procs: 3, breaksAssumption: true, chaos: &simRestartsAtOnce, cfg: func() simConfig {
			c := simElection()
			c.watch, c.observe = 0.3, true
			return c
		}(), world: func(o *world.Options) { o.Outside.RestartEmptyAtOnce = true }},
	}
}

// closingEarly is c with half its processes closing early.
func closingEarly(c simConfig) simConfig {
	c.closeEarly = 0.5
	return c
}
