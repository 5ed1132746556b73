package main

import (
	"fmt"
	"strings"
)

// phase is a slice of a cell's time, as fractions of its duration, and the
// masters stopped during it. Throughput is reported per phase by the time
// each Lock+Unlock completed.
type phase struct {
	name   string
	from   float64
	to     float64
	paused []int // master indices; indices ≥ the number of masters are ignored
}

// scenario is one row of the bench's plan. The list is data: adding a
// scenario is adding an entry to scenarios below.
type scenario struct {
	name string
	desc string
	// shared: every worker locks the same resource (else one each).
	shared bool
	// phases: nil means one phase "all" with no fault.
	phases []phase
	// impls, when set, are the variants this scenario runs instead of the
	// -impls selection (e.g. ours with and without fencing).
	impls []string
	// optIn scenarios run only when -scenarios names them.
	optIn bool
	// partition: the phases cut masters off the network instead of
	// stopping them (needs masters that can be cut: -docker).
	partition bool
}

// phaseList returns the phases, or the single implicit one.
func (s scenario) phaseList() []phase {
	if len(s.phases) == 0 {
		return []phase{{name: "all", from: 0, to: 1}}
	}
	return s.phases
}

// scenarios is the plan, in run order.
var scenarios = []scenario{
	{
		name: "uncontended",
		desc: "W workers, each on its own resource: the cost of one Lock+Unlock",
	},
	{
		name:   "contended",
		desc:   "W workers on one resource: throughput, and handoff from Unlock to the next Lock",
		shared: true,
	},
	{
		name:   "stall",
		desc:   "uncontended, with master 0 stopped for 20–80% of the run and master 1 too for 50–80%",
		phases: stallPhases,
	},
	{
		name:      "partition",
		desc:      "as stall, but master 0, then 1 too, is cut off the network (docker network disconnect: refused, not silent); needs -docker (only when named)",
		phases:    partitionPhases,
		partition: true,
		optIn:     true,
	},
	{
		name:  "fencing",
		desc:  "uncontended, ours without and with fencing tokens: the price of the second round (only when named)",
		impls: []string{"redlock", "redlock-fenced"},
		optIn: true,
	},
	{
		name:  "telemetry",
		desc:  "uncontended, ours with instrumentation off, with the default (no-op) providers, reporting metrics to the OpenTelemetry SDK, and metrics and 1%-sampled traces: the price of observability (only when named)",
		impls: []string{"redlock-off", "redlock", "redlock-otel", "redlock-otel-traces"},
		optIn: true,
	},
	{
		name:   "semaphore",
		desc:   "contended, ours' mutex beside its semaphore with 1, 3 and 8 permits; ratios to the mutex (only when named)",
		shared: true,
		impls:  []string{"redlock", "redlock-sem1", "redlock-sem3", "redlock-sem8"},
		optIn:  true,
	},
	{
		name:   "rwlock",
		desc:   "contended, ours' mutex beside its read-write lock with 90% of operations RLock; ratio to the mutex (only when named)",
		shared: true,
		impls:  []string{"redlock", "redlock-rw90"},
		optIn:  true,
	},
	{
		name:  "sqlfence",
		desc:  "one SQL write per operation on PostgreSQL, guarded by a row lock (SELECT … FOR UPDATE), by ours, by ours with fencing, and by ours with the fence checked in the transaction (module sqlfence); -workers contended and uncontended, interleaved -repeat times (build tag sqlfence; a throwaway PostgreSQL, or $REDLOCK_BENCH_PG; only when named; its own table)",
		impls: []string{},
		optIn: true,
	},
	{
		name:  "leases",
		desc:  "one Locker keeping -leases leases with Lock and Keep (TTL -ttl) for -duration: heap per lease, goroutines, client CPU, extensions/s and script calls/s on master 0, leases lost (only when named; its own table)",
		impls: []string{},
		optIn: true,
	},
	{
		name:  handoverScenario,
		desc:  "-campaigners campaigners (each its own clients) of ours and etcd's elections: the leader resigns; time from Resign to the next leading, for -duration (TTL -election-ttl; only when named; its own table)",
		impls: []string{},
		optIn: true,
	},
	{
		name:  failoverScenario,
		desc:  "the leader, a child process, is SIGKILLed: time to the next campaigner leading, -failovers rounds (ours bounded by the TTL, etcd's by its lease TTL: both -election-ttl; only when named; its own table)",
		impls: []string{},
		optIn: true,
	},
}

func scenarioNames() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.name
	}
	return out
}

// defaultScenarios are the scenarios run when -scenarios is not given.
func defaultScenarios() []string {
	var out []string
	for _, s := range scenarios {
		if !s.optIn {
			out = append(out, s.name)
		}
	}
	return out
}

func scenarioByName(name string) scenario {
	for _, s := range scenarios {
		if s.name == name {
			return s
		}
	}
	panic("redlock-bench: unknown scenario " + name) // names are validated by parseFlags
}

func describeScenarios() string {
	var b strings.Builder
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  %-17s %s\n", s.name, s.desc)
	}
	return b.String()
}

// cell is one implementation in one scenario with one worker count.
type cell struct {
	sc      scenario
	impl    implSpec
	workers int
	run     int // 0-based repetition (-repeat)
}

// label names the cell in errors.
func (c cell) label() string { return fmt.Sprintf("%s/%s/%dw", c.sc.name, c.impl.name, c.workers) }

// plan lists the cells to run: scenario by scenario, then worker count by
// worker count (in -workers order), then implementation by implementation,
// so the cells a ratio compares run next to each other.
func plan(cfg *config) []cell {
	var out []cell
	for _, name := range cfg.scenarios {
		if isElectionScenario(name) {
			continue // not cells: runElections (election.go)
		}
		sc := scenarioByName(name)
		names := cfg.impls
		if sc.impls != nil {
			names = sc.impls
		}
		for _, w := range cfg.workers {
			// -repeat: the group's cells again, every other time in
			// reverse, so that no implementation always goes first.
			for r := range max(cfg.repeat, 1) {
				for k := range names {
					n := names[k]
					if r%2 == 1 {
						n = names[len(names)-1-k]
					}
					out = append(out, cell{sc: sc, impl: implByName(n), workers: w, run: r})
				}
			}
		}
	}
	return out
}
