package redlock

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

// Swarm testing (docs/design.md §20): the swarm row draws a world of its
// own from each seed, inside the assumptions: how many masters, the TTL
// and the timeouts, drift, message delays with heavy tails, which faults
// are on and how often, and the workload (primitive, callers, hold times
// up to the deadline, pollers, extenders, keepers). A row shaped by hand
// catches the bugs it was shaped for; a drawn one is not shaped at all.
// Each drawn world's tags say what it exercised, and TestSim reports how
// often each tag was drawn.

// swarmRow is the row whose world each seed draws (drawSwarm).
func swarmRow() *simRow { return &simRow{name: "swarm", swarm: true} }

// swarmRowBefore is the swarm row as it drew its worlds before it drew
// the rest of the surface (drawSurface): the regressions found then
// replay their worlds.
func swarmRowBefore() *simRow {
	return &simRow{name: "swarm", swarm: true, noSurface: true, hoursApart: true}
}

// swarmRowAsFound is the swarm row as it drew its worlds before it drew
// the hosts' clocks, which were then an hour apart: the regressions found
// then replay their worlds.
func swarmRowAsFound() *simRow { return &simRow{name: "swarm", swarm: true, hoursApart: true} }

// pick is one of xs, uniformly.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// drawSwarm is seed's world for the swarm row, from a source of its own
// (the world's is drawn from the same seed, apart).
func drawSwarm(seed uint64, surface, hoursApart bool) *simRow {
	r := rand.New(rand.NewPCG(seed, 0x5a4a4d))
	row := &simRow{name: "swarm", swarm: true, procs: 2 + r.IntN(3)}
	var tags []string
	tag := func(format string, a ...any) { tags = append(tags, fmt.Sprintf(format, a...)) }

	ttl := pick(r, 100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond, time.Second, 2*time.Second)
	o := Options{TTL: ttl, MasterTimeout: ttl / time.Duration(pick(r, 2, 5, 10, 20, 50))}
	// Up to 80 %: a window shorter than MasterTimeout, so that a round
	// can outlast it.
	o.SafetyMargin = ttl * time.Duration(pick(r, 0, 5, 10, 20, 30, 50, 80)) / 100
	o.DriftFactor = pick(r, 0.002, 0.01, 0.05)
	o.Retry = RetryPolicy{MinDelay: ttl / 100, MaxDelay: ttl / time.Duration(pick(r, 5, 20))}
	tag("ttl=%v", ttl)
	tag("master-timeout=ttl/%d", ttl/o.MasterTimeout)
	tag("safety-margin=%d%%", o.SafetyMargin*100/ttl)
	tag("drift-factor=%v", o.DriftFactor)

	masters := 3 + r.IntN(5)
	tag("masters=%d", masters)
	// Clock rates within the DriftFactor: (1 + d) / (1 − d) ≤ 1 + DriftFactor.
	drift := o.DriftFactor / (2 + o.DriftFactor) * r.Float64()
	delay := world.Dist{Min: time.Duration(20+r.IntN(80)) * time.Microsecond}
	delay.Mean = delay.Min + time.Duration(r.Int64N(int64(min(2*time.Millisecond, o.MasterTimeout/4))))
	delay.Max = delay.Mean + time.Duration(r.Int64N(int64(o.MasterTimeout)))
	judged := true
	if r.IntN(3) == 0 {
		// A heavy tail near and past MasterTimeout: rounds fail on slow
		// answers, which are no outage, so liveness is not judged.
		delay.Tail = pick(r, 0.001, 0.01, 0.05)
		delay.Max = o.MasterTimeout * time.Duration(1+r.IntN(3))
		judged = false
		tag("delay=heavy-tail")
	} else {
		tag("delay=light")
	}
	loss, dup := pick(r, 0, 0.01, 0.05), pick(r, 0, 0.01, 0.05)
	if loss > 0 || dup > 0 {
		tag("pubsub-loss-or-dup")
	}
	// The hosts' clocks: an hour apart, or agreeing within a quarter of
	// MasterTimeout, as NTP keeps them (a queue member's instant then
	// stands, join.lua). Drawn from a source of its own, so that the
	// draws above and below are a seed's as before.
	offset := time.Hour
	if c := rand.New(rand.NewPCG(seed, 0xc10c)); c.IntN(2) == 0 && !hoursApart {
		offset = time.Duration(1 + c.Int64N(int64(o.MasterTimeout/4)))
		tag("clocks=agree")
	} else {
		tag("clocks=hours-apart")
	}
	row.world = func(w *world.Options) {
		w.Masters, w.Drift, w.Delay, w.PubSubLoss, w.PubSubDup = masters, drift, delay, loss, dup
		w.Offset = offset
	}

	cfg := simConfig{resources: []string{"a", "b", "c"}[:1+r.IntN(3)], callers: 1 + r.IntN(3),
		hold: ttl / time.Duration(pick(r, 100, 20, 4)), think: time.Duration(1+r.IntN(10)) * time.Millisecond}
	tag("resources=%d", len(cfg.resources))
	switch prim := pick(r, "mutex", "mutex", "fenced", "semaphore", "rwmutex", "election"); prim {
	case "fenced":
		o.Fencing = true
	case "semaphore":
		cfg.permits = 1 + r.IntN(3)
	case "rwmutex":
		cfg.readers = pick(r, 0.3, 0.7, 0.9)
	case "election":
		o.Fencing, cfg.election = true, true
	}
	tag("primitive=%s", primName(o, cfg))
	if !cfg.election {
		switch r.IntN(5) {
		case 0:
			cfg.keep, cfg.keepHold = 1, ttl*time.Duration(1+r.IntN(3))
			tag("workload=kept")
		case 1:
			cfg.keep, cfg.keepHold = 0.3, ttl*time.Duration(1+r.IntN(3))
			tag("workload=some-kept")
		case 2:
			if o.SafetyMargin > 0 {
				cfg.toDeadline, cfg.stall = true, time.Duration(r.Int64N(int64(o.SafetyMargin)+1))
				tag("workload=to-deadline")
			}
		case 3:
			cfg.extend = true
			tag("workload=extend")
		}
		if r.IntN(3) == 0 {
			cfg.pollers = 1
			tag("pollers")
		}
	}
	if cfg.pollers > 0 || o.Fencing || cfg.permits > 0 {
		// Pollers cut in line. A fenced lock's waiters (and so an
		// election's campaigns) and a semaphore's waiters of different
		// Lockers acquire by rounds, racing for what a release freed
		// (§18.2), not through the queue's hand-off, which the bound
		// counts on: drawn worlds found them past it (§20), so they are
		// not judged.
		judged = false
	}
	if cfg.toDeadline && cfg.keep == 0 {
		cfg.hold = 0
	}
	cfg.opts = o
	row.cfg = cfg
	row.noLiveness = !judged

	if r.IntN(4) > 0 {
		kinds := []world.FaultKind{world.StallConn, world.CutConn, world.CutPubSub, world.StallMaster, world.RestartMaster, world.PauseClient}
		ch := world.Chaos{Every: ttl / time.Duration(pick(r, 1, 5, 20)), Keep: r.Float64(),
			For:       world.Dist{Min: time.Millisecond, Mean: ttl / time.Duration(pick(r, 3, 10, 30)), Max: ttl},
			EmptyDown: ttl + time.Duration(float64(ttl)*o.DriftFactor) + time.Millisecond}
		ch.For.Mean = max(ch.For.Mean, ch.For.Min)
		if o.Fencing {
			ch.Keep = 1 // fencing assumes no counter is lost (§5, assumption 5)
		}
		for _, k := range kinds {
			if k == world.PauseClient && o.SafetyMargin < 2*time.Millisecond {
				continue // a pause past the margin is outside
			}
			if r.IntN(2) == 0 {
				ch.Kinds = append(ch.Kinds, k)
				tag("fault=%v", k)
			}
		}
		if len(ch.Kinds) > 0 {
			if o.SafetyMargin >= 2*time.Millisecond && slices.Contains(ch.Kinds, world.PauseClient) {
				// Every fault's length is drawn from one distribution:
				// a pause must fit in the margin, so all do.
				ch.For.Max = min(ch.For.Max, o.SafetyMargin)
				ch.For.Mean = min(ch.For.Mean, ch.For.Max)
			}
			row.chaos = &ch
			tag("faults=on")
		}
	}
	if row.chaos == nil {
		tag("faults=off")
	}
	if surface {
		drawSurface(r, row, tag)
	}
	row.tags = tags
	return row
}

// drawSurface draws the rest of the public surface into a swarm world,
// after every other draw (so that a world drawn before keeps its other
// parameters): hand-overs and adoptions, locks on several resources, for
// a mutex; readers of the holders or of the leader, and observers, for a
// semaphore and an election. Liveness is not judged with hand-overs
// (a lock handed over and not adopted is left to expire, as a holder that
// dies leaves it, any number of times) nor with locks on several
// resources (the bound counts one resource's callers).
func drawSurface(r *rand.Rand, row *simRow, tag func(string, ...any)) {
	cfg := &row.cfg
	if r.IntN(3) == 0 {
		cfg.shut = pick(r, 0.5, 1)
		tag("surface=shutdown")
	}
	switch {
	case cfg.permits > 0:
		if r.IntN(2) == 0 {
			cfg.watch = pick(r, 0.1, 0.3)
			tag("surface=holders")
		}
	case cfg.election:
		if r.IntN(2) == 0 {
			cfg.watch = pick(r, 0.1, 0.3)
			tag("surface=leader")
		}
		if r.IntN(2) == 0 {
			cfg.observe = true
			tag("surface=observe")
		}
	case cfg.readers == 0:
		if r.IntN(3) == 0 {
			cfg.adopt = pick(r, 0.1, 0.3)
			row.noLiveness = true
			tag("surface=adopt")
		}
		if len(cfg.resources) > 1 && r.IntN(3) == 0 {
			cfg.multi = pick(r, 0.1, 0.3)
			row.noLiveness = true
			tag("surface=lock-all")
		}
	}
	if cfg.extend && r.IntN(2) == 0 {
		cfg.extendDrawn = true
		tag("surface=extend-drawn")
		if row.chaos != nil {
			// Assumption 2 counts the longest TTL a lock may be given.
			longest := extendDrawnMax * cfg.opts.TTL
			row.chaos.EmptyDown = longest + time.Duration(float64(longest)*cfg.opts.DriftFactor) + time.Millisecond
		}
	}
}

func primName(o Options, cfg simConfig) string {
	switch {
	case cfg.election:
		return "election"
	case cfg.permits > 0:
		return "semaphore"
	case cfg.readers > 0:
		return "rwmutex"
	case o.Fencing:
		return "fenced"
	}
	return "mutex"
}
