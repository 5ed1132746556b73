package redlock

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
)

// simScripts are the masters' models of the library's scripts.
var simScripts = sync.OnceValues(func() (*sim.Scripts, error) {
	_, s, err := sim.LoadScripts("scripts")
	return s, err
})

// simRow is one kind of run: processes, their callers' work, the world's
// network and faults, and whether the run keeps the assumptions.
type simRow struct {
	name  string
	procs int
	cfg   simConfig
	// world sets the world's options (the seed, scripts and assumptions
	// are set after it).
	world func(o *world.Options)
	chaos *world.Chaos
	// labFaults: the fault lab's faults (simLabFaults) instead of chaos,
	// and span: the simulated time per seed (0: -sim.span).
	labFaults bool
	span      time.Duration
	// breaksAssumption: the run breaks an assumption on purpose and must
	// show a violation.
	breaksAssumption bool
	// oneSeedIn: a row inside the assumptions runs on one seed in
	// oneSeedIn (0, 1: each); the edge rows, whose pollers make many
	// rounds per section, run less often than the mutex rows.
	oneSeedIn int
	// swarm: each seed draws the row's world (drawSwarm); tags say what
	// the drawn world exercises; noLiveness: liveness is not judged (a
	// heavy tail of delays, or pollers that cut in line).
	swarm      bool
	tags       []string
	noLiveness bool
	// noSurface: the swarm row draws its worlds as before it drew the
	// rest of the surface (swarmRowBefore). hoursApart: as before it drew
	// the hosts' clocks (swarmRowAsFound), an hour apart.
	noSurface, hoursApart bool
}

// simRun is what one seed of a row gave.
type simRun struct {
	seed       uint64
	hash       uint64
	sections   int
	events     uint64
	violations []world.Violation
	trace      []world.TraceEvent
	// liveness: calls that could have acquired within the row's bound
	// and did not (violations too, in the rows without pollers:
	// docs/design.md §20); judged: the calls the bound applied to; calls:
	// the Lock calls (a TryLock's context allows it nothing).
	liveness, judged, calls int
	tags                    []string // a swarm world's (simRow.tags)
	surface                 [numSurface]int
}

// livenessPremises are the premises of liveness and their bounds
// (docs/design.md §20), the first that holds for a call judging it. Both
// ask a majority of masters without an outage for the call's client
// until it returned (or its bound). The first asks it from a TTL before
// the call: every caller of the resource may be ahead of it (C of them),
// each holding for up to its section, then handing on within H = 4 ×
// MasterTimeout + MaxDelay; one holder may have died and left its key to
// expire (TTL); a key taken before the majority became stable has expired
// by the call's start. The second asks it from the call's start only, and
// bounds the call by a TTL and the drift more: a key left on those
// masters before the call, by a round or a holder that no longer counts
// on it, expires within that (its masters' clocks running slow by up to
// the DriftFactor); a queue member left there is a caller's, in C.
func livenessPremises(row *simRow) []world.Premise {
	o := row.cfg.opts.withDefaults()
	section := row.cfg.hold + row.cfg.think + row.cfg.stall
	if row.cfg.keep > 0 {
		section += row.cfg.keepHold
	}
	if row.cfg.toDeadline {
		section += o.TTL
	}
	c := time.Duration(row.procs * (row.cfg.callers + row.cfg.pollers))
	bound := o.TTL + c*(section+4*o.MasterTimeout+o.Retry.MaxDelay)
	return []world.Premise{{Window: o.TTL, Bound: bound}, {Window: 0, Bound: bound + o.TTL + o.budget().Drift()}}
}

// runSim runs row with seed for span of simulated time, stops the
// processes, lets the world drain, and checks the history.
func runSim(row *simRow, seed uint64, span time.Duration, trace bool) (simRun, error) {
	r, _, err := runSimWorld(row, seed, span, trace)
	return r, err
}

// runSimWorld is runSim, also returning the world, for a replay to look
// into.
func runSimWorld(row *simRow, seed uint64, span time.Duration, trace bool) (simRun, *world.World, error) {
	if row.swarm {
		row = drawSwarm(seed, !row.noSurface, row.hoursApart)
	}
	scripts, err := simScripts()
	if err != nil {
		return simRun{}, nil, err
	}
	o := row.cfg.opts.withDefaults()
	wo := world.Options{}
	if row.world != nil {
		row.world(&wo)
	}
	wo.Seed, wo.Scripts, wo.Trace = seed, scripts, trace
	wo.Assume = world.Assumptions{TTL: o.TTL, DriftFactor: o.DriftFactor, SafetyMargin: o.SafetyMargin}
	w, err := world.New(wo)
	if err != nil {
		return simRun{}, nil, err
	}
	procs := make([]*simProc, row.procs)
	shared := &simShared{span: span}
	for i := range row.procs {
		p, err := newSimProc(w, i, &row.cfg, shared)
		if err != nil {
			return simRun{}, nil, err
		}
		procs[i] = p
		w.Add(p)
	}
	if row.chaos != nil {
		if err := w.Chaos(0, span, *row.chaos); err != nil {
			return simRun{}, nil, err
		}
	}
	if row.labFaults {
		r := rand.New(rand.NewPCG(seed, 0x1ab))
		for _, f := range simLabFaults(r, span, w.Masters(), row.procs, o.TTL, o.Fencing) {
			if err := w.Inject(f); err != nil {
				return simRun{}, nil, err
			}
		}
	}
	if row.cfg.closeEarly > 0 {
		// The processes stop while a minority of masters has been stalled
		// for half a TTL (their streams park what they send them) and
		// stays so for another: a process closing early drops it.
		w.Run(span - o.TTL/2)
		for _, m := range w.Rand().Perm(w.Masters())[:(w.Masters()-1)/2] {
			if err := w.Inject(world.Fault{Kind: world.StallMaster, Master: m, At: w.Now(), For: o.TTL}); err != nil {
				return simRun{}, nil, err
			}
		}
	}
	w.Run(span)
	w.Stop()
	if !w.Drain(50_000_000) {
		return simRun{}, nil, fmt.Errorf("seed %d: the world did not drain", seed)
	}
	h := w.History()
	var vs []world.Violation
	vs = append(vs, world.Exclusion(h.Intervals, row.cfg.permits)...)
	vs = append(vs, world.Fences(h.Intervals)...)
	vs = append(vs, world.Readings(&h)...)
	vs = append(vs, world.Terms(&h)...)
	// A master lost to a process is tried again by its stream's probe,
	// every max(MasterTimeout, 1 s), answered within a MasterTimeout
	// (docs/design.md §10): until then its Holders skips it.
	reprobe := max(o.MasterTimeout, time.Second) + o.MasterTimeout
	vs = append(vs, world.Holders(&h, keyLife(o), reprobe, holdersJudged(w.Options().Delay, o))...)
	vs = append(vs, world.Closings(&h)...)
	if row.cfg.keep == 1 { // every section kept: each one's Done is a promise
		vs = append(vs, world.DoneByDeadline(h.Intervals)...)
	}
	// A majority without an outage extends a kept lock in time (§8)
	// where every round trip takes less than a tenth of the validity
	// window (the keeper extends with a third of it left, or earlier)
	// and no longer than MasterTimeout (an extension waits at least that
	// long for the masters' answers, a quarter of the time left if more:
	// a round trip past it can fail every extension of a lock with all
	// its masters up, as the swarm's seed 1603 showed); not where locks
	// are handed over (the adopter's release ends the lock its giver
	// kept). world.Kept also leaves out a lock kept with less than two
	// round trips to spare (docs/design.md §20).
	rtt := 2 * w.Options().Delay.Max // the delay as the world drew it, its default filled in
	keptJudged := row.cfg.adopt == 0 && rtt < o.budget().Window()/10 && rtt <= o.MasterTimeout
	for _, p := range procs {
		vs = append(vs, p.broken...)
		if keptJudged {
			vs = append(vs, world.Kept(&h, p.losses, rtt)...)
		}
	}
	vs = append(vs, leftBehind(w, row, o)...)
	// Liveness is judged where the bound holds: not in the rows whose
	// TryLock pollers take a free key ahead of the queue.
	lv, judged := world.LivenessJudged(h, livenessPremises(row)...)
	if row.noLiveness {
		lv, judged = nil, 0
	}
	if row.cfg.pollers == 0 && !row.swarm {
		// The swarm's liveness is reported, not asserted: drawn worlds
		// found calls past the bound (docs/design.md §20). An election's
		// is asserted: a campaign whose publish falls short (a master
		// that took its key went down after the acquisition while
		// another majority stayed stable) campaigns again (§21).
		vs = append(vs, lv...)
	}
	r := simRun{seed: seed, hash: w.Hash(), sections: w.Sections(), events: w.Events(), violations: vs, liveness: len(lv)}
	r.judged, r.tags, r.surface = judged, row.tags, shared.count
	for _, c := range h.Calls {
		if c.Limit-c.Start > time.Microsecond {
			r.calls++
		}
	}
	if trace && len(vs) > 0 {
		r.trace = w.TraceAround(vs[0].At, 0, 60, 20)
	}
	return r, w, nil
}

// keyLife is the longest a key may stand on a master after the last
// command that set or extended it was sent: a TTL on a master's clock
// running slow by up to the DriftFactor, with the drift constant, and an
// extension in flight (a MasterTimeout).
func keyLife(o Options) time.Duration {
	return o.TTL + time.Duration(float64(o.TTL)*2*o.DriftFactor) + o.DriftConstant + o.MasterTimeout
}

// holdersJudged says which readings of a semaphore's holders must count
// every permit held throughout them (world.Holders): in a world whose
// messages (d, as the world drew it) are all within half a MasterTimeout,
// so that every master answers a reading in time when nothing stalls it.
func holdersJudged(d world.Dist, o Options) func(world.Observation) bool {
	ok := d.Tail == 0 && 2*d.Max < o.MasterTimeout
	return func(world.Observation) bool { return ok }
}

// leftBehind checks what the processes left on the masters once they all
// stopped and the world drained. Left by design: counters (fences, a
// read-write lock's count of write grants, ":wg"), and keys that expire a
// TTL after their last use (a semaphore's permits record, sem_acquire.lua;
// a writer's intent, ":wi", rw_write.lua). When a process closed early
// (simConfig.closeEarly), or by Close (simConfig.shut), or a lock was
// handed over and not adopted (simConfig.adopt), what it dropped or left
// may still be there: every such key must have an expiry, and once the
// longest life a key or queue member is given has passed (the TTL, the
// longest an Extend draws, or a queue's life, docs/design.md §14.1), on
// the slowest clock, nothing may be left.
func leftBehind(w *world.World, row *simRow, o Options) []world.Violation {
	byDesign := func(k string) bool {
		for _, suffix := range []string{fenceSuffix, metaSuffix, ":wg", ":wi", leaderSuffix} {
			if strings.HasSuffix(k, suffix) {
				return true
			}
		}
		return false
	}
	if row.cfg.closeEarly == 0 && row.cfg.adopt == 0 && row.cfg.shut == 0 {
		return world.Leftovers(w, byDesign)
	}
	var vs []world.Violation
	for i := range w.Masters() {
		now := w.MasterNow(i)
		for _, k := range w.Master(i).Keys(now) {
			if r := w.Master(i).Do(now, []string{"PTTL", k}); !byDesign(k) && r.Int == -1 {
				vs = append(vs, world.Violation{Check: "leftover", At: w.Now(),
					What: fmt.Sprintf("master %d holds %q with no expiry", i, k)})
			}
		}
	}
	ttl := o.TTL
	if row.cfg.extendDrawn {
		ttl *= extendDrawnMax // the longest TTL an Extend draws
	}
	life := max(ttl, 8*(o.Retry.MaxDelay+o.MasterTimeout))
	w.Run(w.Now() + life + time.Duration(float64(life)*2*o.DriftFactor) + o.DriftConstant)
	return append(vs, world.Leftovers(w, byDesign)...)
}
