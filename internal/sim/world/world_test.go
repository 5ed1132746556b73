package world_test

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
	"github.com/quorumlab/redlock/validity"
)

const ms = time.Millisecond

// row is one simulated run: a world of masters and fixture clients, a
// schedule of faults, a length.
type row struct {
	opts    world.Options
	clients int
	cfg     lockerConfig
	chaos   *world.Chaos
	length  time.Duration
}

// insideRow is a run inside the assumptions: clocks within the budget's
// drift (two clocks drawn within ±0.0005 of the global one differ by at
// most about 0.001, below DriftFactor 0.01), masters restarted empty stay
// down a TTL and more, no client pauses; connections and processes stall,
// cut and restart with their data.
func insideRow(seed uint64) row {
	ttl := 50 * ms
	return row{
		opts: world.Options{Seed: seed, Masters: 5, Drift: 0.0005, PubSubLoss: 0.1, PubSubDup: 0.1,
			Assume: world.Assumptions{TTL: ttl, DriftFactor: 0.01}},
		clients: 8,
		cfg: lockerConfig{
			masters:     5,
			budget:      validity.Budget{TTL: ttl, DriftFactor: 0.01, DriftConstant: 2 * ms},
			nodeTimeout: 5 * ms,
			resources:   []string{"{a}", "{b}"},
			subscribe:   true,
			attempts:    3,
			backoff:     3 * ms,
			hold:        10 * ms,
			think:       2 * ms,
		},
		chaos: &world.Chaos{
			Every: 20 * ms,
			Kinds: []world.FaultKind{world.StallConn, world.CutConn, world.CutPubSub, world.StallMaster, world.RestartMaster},
			For:   world.Dist{Min: ms, Mean: 10 * ms, Max: 100 * ms}, Keep: 0.5,
			EmptyDown: 2 * ttl,
		},
		length: 1500 * ms,
	}
}

// run plays r on seed r.opts.Seed and drains the world after stopping
// its clients.
func run(t testing.TB, r row) *world.World {
	t.Helper()
	srcs, scripts := loadScripts(t)
	r.opts.Scripts = scripts
	w, err := world.New(r.opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.cfg
	cfg.releaseSHA, cfg.releaseSrc = scripts.SHA("release.lua"), srcs["release.lua"]
	for i := range r.clients {
		w.Add(newTryLocker(&cfg, i, w.Rand()))
	}
	if r.chaos != nil {
		if err := w.Chaos(0, r.length, *r.chaos); err != nil {
			t.Fatal(err)
		}
	}
	w.Run(r.length)
	w.Stop()
	if !w.Drain(10_000_000) {
		t.Fatalf("seed %d: the world is still busy after stopping", r.opts.Seed)
	}
	return w
}

// check runs the checkers a mutex's run must pass.
func check(w *world.World) []world.Violation {
	h := w.History()
	vs := world.Exclusion(h.Intervals, 0)
	vs = append(vs, world.DoneByDeadline(h.Intervals)...)
	vs = append(vs, world.Leftovers(w, nil)...)
	return vs
}

// report replays r with a trace and returns the report of vs, which the
// run w found; the replay must be the same run (the same hash).
func report(t *testing.T, r row, w *world.World, vs []world.Violation) string {
	t.Helper()
	r.opts.Trace = true
	again := run(t, r)
	if again.Hash() != w.Hash() {
		t.Errorf("seed %d replayed with a trace: hash %x, the run's %x", r.opts.Seed, again.Hash(), w.Hash())
	}
	return world.Report(r.opts.Seed, vs, again.TraceAround(vs[0].At, vs[0].At-2*r.cfg.budget.TTL, 30, 10))
}

// The same seed replays the same run: the same history hash and the same
// sections; another seed gives another.
func TestSameSeedSameHash(t *testing.T) {
	r := insideRow(7)
	r.length = 500 * ms
	a, b := run(t, r), run(t, r)
	if a.Hash() != b.Hash() || a.Events() != b.Events() {
		t.Fatalf("seed 7 twice: hash %x and %x, %d and %d events", a.Hash(), b.Hash(), a.Events(), b.Events())
	}
	ha, hb := a.History(), b.History()
	if len(ha.Intervals) != len(hb.Intervals) || len(ha.Intervals) == 0 {
		t.Fatalf("seed 7 twice: %d and %d sections", len(ha.Intervals), len(hb.Intervals))
	}
	for i := range ha.Intervals {
		if ha.Intervals[i] != hb.Intervals[i] {
			t.Fatalf("section %d differs:\n%v\n%v", i, ha.Intervals[i], hb.Intervals[i])
		}
	}
	r.opts.Seed = 8
	if c := run(t, r); c.Hash() == a.Hash() {
		t.Fatalf("seeds 7 and 8 gave the same hash %x", a.Hash())
	}
	// Tracing changes nothing but what is kept.
	r.opts.Seed, r.opts.Trace = 7, true
	if d := run(t, r); d.Hash() != a.Hash() {
		t.Fatalf("seed 7 traced: hash %x, untraced %x", d.Hash(), a.Hash())
	}
	t.Logf("seed 7: %d sections, %d events, hash %x", len(ha.Intervals), a.Events(), a.Hash())
}

// Inside the assumptions, with stalls, cuts and restarts, the fixture's
// sections never overlap, none outlives its deadline, and nothing is left
// on the masters.
func TestInsideAssumptions(t *testing.T) {
	sections := 0
	for seed := range uint64(4) {
		r := insideRow(seed)
		w := run(t, r)
		sections += w.Sections()
		if vs := check(w); len(vs) > 0 {
			t.Fatal(report(t, r, w, vs))
		}
	}
	if sections < 1000 {
		t.Fatalf("only %d sections in four runs", sections)
	}
	t.Logf("%d sections, 0 violations", sections)
}

// outsideRow breaks assumption 2, 3 or both (docs/design.md §3):
// masters restarted empty come back at once, and the masters' clocks run
// up to 20% apart from the clients' (the clients' budget allows 1%).
// Three masters, one resource, six clients; holders keep the lock until
// near their deadline, so keys vanish or expire early under them.
func outsideRow(seed uint64, restart, drift bool) row {
	r := insideRow(seed)
	r.clients = 6
	r.cfg.masters, r.opts.Masters = 3, 3
	r.cfg.resources = []string{"{a}"}
	r.cfg.hold = r.cfg.budget.TTL
	r.chaos = nil
	if restart {
		r.chaos = &world.Chaos{Every: 30 * ms, Kinds: []world.FaultKind{world.RestartMaster},
			For: world.Dist{}, Keep: 0, EmptyDown: 0}
		r.opts.Outside.RestartEmptyAtOnce = true
	}
	if drift {
		r.opts.Drift = 0.2
		r.opts.Outside.DriftBeyond = true
	}
	r.length = time.Second
	return r
}

// Outside the assumptions the exclusion checker finds two holders at
// once, in each row: a row that should fail and passes is a broken
// checker (or a fault that does not happen).
func TestOutsideAssumptionsTwoHolders(t *testing.T) {
	for _, tc := range []struct {
		name           string
		restart, drift bool
	}{
		{"restart empty at once and drift beyond the factor", true, true},
		{"restart empty at once", true, false},
		{"drift beyond the factor", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(10) {
				r := outsideRow(seed, tc.restart, tc.drift)
				w := run(t, r)
				if vs := world.Exclusion(w.History().Intervals, 0); len(vs) > 0 {
					t.Logf("found in seed %d:\n%s", seed, report(t, r, w, vs[:1]))
					return
				}
			}
			t.Fatal("ten seeds outside the assumptions and no two holders at once")
		})
	}
	// The control: the same rows with neither fault find nothing.
	for seed := range uint64(5) {
		r := outsideRow(seed, false, false)
		if w := run(t, r); len(check(w)) > 0 {
			t.Fatalf("the control row, inside the assumptions:\n%s", report(t, r, w, check(w)))
		}
	}
}

// A holder paused past its deadline is still in its section when it
// resumes: DoneByDeadline reports it (the fixture has no Done to close).
func TestPausedHolderOutlivesDeadline(t *testing.T) {
	r := insideRow(3)
	r.chaos = &world.Chaos{Every: 20 * ms, Kinds: []world.FaultKind{world.PauseClient},
		For: world.Dist{Min: 60 * ms, Mean: 80 * ms, Max: 100 * ms}}
	r.opts.Outside.PausePastMargin = true
	r.length = time.Second
	w := run(t, r)
	vs := world.DoneByDeadline(w.History().Intervals)
	if len(vs) == 0 {
		t.Fatal("clients paused past the TTL, and no section outlived its deadline")
	}
	t.Logf("%d violations, the first: %v", len(vs), vs[0])
}

// Each client alone on its resource, under stalls, cuts and restarts:
// every call that had a majority of masters reachable and stable acquires
// within its rounds. The window: a TTL and a half before the call (a key
// a lost release left behind expires on its master within a TTL, times
// the drift) and through the bound. The bound: the fixture's three
// rounds, each up to MasterTimeout, and two backoffs.
func TestLivenessUncontended(t *testing.T) {
	calls := 0
	for seed := range uint64(3) {
		r := insideRow(100 + seed)
		r.cfg.own = true
		r.cfg.resources = []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"}
		w := run(t, r)
		h := w.History()
		window := r.cfg.budget.TTL * 3 / 2
		bound := 3*r.cfg.nodeTimeout + 2*r.cfg.backoff
		if vs := world.Liveness(h, window, bound); len(vs) > 0 {
			t.Fatal(report(t, r, w, vs))
		}
		// The check judged these calls: a bound shorter than a round's
		// two network delays fails them.
		if vs := world.Liveness(h, window, 100*time.Microsecond); len(vs) == 0 {
			t.Fatal("a bound of 100µs failed no call: the check judged none")
		}
		if vs := check(w); len(vs) > 0 {
			t.Fatal(report(t, r, w, vs))
		}
		calls += len(h.Calls)
	}
	t.Logf("%d calls", calls)
}

// A world told what its clients assume refuses what breaks it, unless the
// run says it breaks it on purpose: an inside row cannot hold an outside
// fault by mistake.
func TestAssumptionsGuarded(t *testing.T) {
	assume := world.Assumptions{TTL: 100 * ms, DriftFactor: 0.01, SafetyMargin: 5 * ms}
	if _, err := world.New(world.Options{Drift: 0.006, Assume: assume}); err == nil {
		t.Error("Drift 0.006 (clocks up to 1.2% apart) accepted against a DriftFactor of 1%")
	}
	if _, err := world.New(world.Options{Drift: 0.006, Assume: assume, Outside: world.Outside{DriftBeyond: true}}); err != nil {
		t.Errorf("DriftBeyond: %v", err)
	}
	if _, err := world.New(world.Options{Drift: 0.004, Assume: assume}); err != nil {
		t.Errorf("Drift 0.004 (clocks up to 0.8%% apart): %v", err)
	}
	for _, tc := range []struct {
		f       world.Fault
		outside world.Outside
		ok      bool
	}{
		{world.Fault{Kind: world.RestartMaster, For: 100 * ms}, world.Outside{}, false},
		{world.Fault{Kind: world.RestartMaster, For: 101 * ms}, world.Outside{}, true},
		{world.Fault{Kind: world.RestartMaster, For: 0, Keep: true}, world.Outside{}, true},
		{world.Fault{Kind: world.RestartMaster, For: 0}, world.Outside{RestartEmptyAtOnce: true}, true},
		{world.Fault{Kind: world.PauseClient, For: 5 * ms}, world.Outside{}, true},
		{world.Fault{Kind: world.PauseClient, For: 6 * ms}, world.Outside{}, false},
		{world.Fault{Kind: world.PauseClient, For: time.Second}, world.Outside{PausePastMargin: true}, true},
	} {
		w, err := world.New(world.Options{Masters: 1, Assume: assume, Outside: tc.outside})
		if err != nil {
			t.Fatal(err)
		}
		w.Add(&scripted{w: w})
		if err := w.Inject(tc.f); (err == nil) != tc.ok {
			t.Errorf("%v with %+v: error %v, want accepted %v", tc.f, tc.outside, err, tc.ok)
		}
	}
}

// A world whose clocks could read below 0 is refused: every clock reads
// Epoch ± Offset.
func TestOffsetBeyondEpochRefused(t *testing.T) {
	if _, err := world.New(world.Options{Offset: 2 * time.Hour, Epoch: time.Hour}); err == nil {
		t.Fatal("Offset 2h with Epoch 1h: no error")
	}
	if _, err := world.New(world.Options{Offset: time.Hour, Epoch: time.Hour}); err != nil {
		t.Fatalf("Offset 1h with Epoch 1h: %v", err)
	}
}
