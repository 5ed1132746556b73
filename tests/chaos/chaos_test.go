package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
)

var (
	long     = flag.Bool("chaos.long", false, "run the long chaos scenarios (≥ 100 000 critical sections inside the assumptions); make chaos")
	seedFlag = flag.Uint64("chaos.seed", 0, "seed of the fault schedules (0: a random one, printed); re-run with it to replay")
	jsonOut  = flag.String("chaos.json", "", "write the results as JSON to this file")
	backend  = flag.String("chaos.backend", "process", "what runs the faulted masters: process (redis-server, faults through the proxy) or docker (containers: docker pause, network disconnect, container kill and restart)")
	sections = flag.Int("chaos.sections", 0, "with -chaos.long: critical sections each scenario inside the assumptions runs to (0: 100 000; then it ends as soon as they are in, after 10 s); make chaos-soak")
)

// seed is the run's seed, set in TestMain: tests never change it.
var seed uint64

func TestMain(m *testing.M) {
	flag.Parse()
	if *backend != "process" && *backend != "docker" {
		fmt.Fprintf(os.Stderr, "chaos: -chaos.backend %q: want process or docker\n", *backend)
		os.Exit(2)
	}
	if os.Getenv(HelperEnv) == "" {
		seed = *seedFlag
		if seed == 0 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			// 53 bits, so the seed survives JSON readers that use doubles (jq).
			seed = binary.LittleEndian.Uint64(b[:]) >> 11
		}
		fmt.Printf("chaos: seed=%d (replay: go test ./tests/chaos -chaos.seed=%d)\n", seed, seed)
	}
	goleak.VerifyTestMain(m)
}

// TestHelperClient is a subprocess workload client's entry point, not a
// test: the harness re-executes the test binary with -test.run set to it
// and the client's configuration in $REDLOCK_CHAOS_CLIENT.
func TestHelperClient(t *testing.T) {
	if os.Getenv(HelperEnv) == "" {
		t.Skip("subprocess client entry point; runs only when started by the chaos harness")
	}
	if err := RunHelper(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// The workload scenarios. TTL 500 ms and MasterTimeout 50 ms make faults
// matter within seconds; latency stays below MasterTimeout/2 each way.
// On Docker masters (docker: true) the faults are the containers' own:
// docker pause, network disconnect, container kill and a new container;
// there is no proxy, so no latency fault. Removing a container and
// starting a new one takes about a second, longer than the TTL and far
// longer than a 20-80 ms hold, so the restart-empty row there runs with a
// 3 s TTL and 1.2-2.2 s holds: the restart lands while a lock is held.
func workloads(long, docker bool) []Workload {
	const ttl, nodeTimeout = 500 * time.Millisecond, 50 * time.Millisecond
	plan := func(maxFaulted int, kinds ...Kind) Plan {
		return Plan{Kinds: kinds, Masters: 5, MaxFaulted: maxFaulted, Clients: 2, TTL: ttl, MasterTimeout: nodeTimeout}
	}
	insideKinds := []Kind{PauseMasters, KillDelayed, Latency, Cut}
	if docker {
		insideKinds = []Kind{PauseMasters, KillDelayed, Cut}
	}
	short := func(w Workload, d time.Duration) Workload {
		w.Duration, w.MaxDuration = d, d
		w.Plan.Length = d
		return w
	}
	lng := func(w Workload, d time.Duration, minSections int, maxD time.Duration) Workload {
		w.Duration, w.MaxDuration, w.MinSections = d, maxD, minSections
		w.Plan.Length = maxD
		return w
	}
	inside := Workload{
		Name: "inside: minority faults", Inside: true,
		Plan: plan(2, insideKinds...),
		// One client is a subprocess (never paused here): its sections are
		// merged with the others' on the shared CLOCK_MONOTONIC, so a
		// clean run also shows the cross-process history is consistent.
		InProcess: 4, Subprocess: 1, Resources: []string{"r0", "r1", "r2", "r3"},
		HoldMax: 2 * time.Millisecond,
	}
	// The same faults and clients without fencing: their Lock calls that
	// wait across Lockers are handed the key by the release (§14.3), a
	// path fenced acquisitions never take.
	handoff := inside
	handoff.Name, handoff.Unfenced = "handoff: minority faults, no fencing (inside the assumptions)", true
	restart := Workload{
		Name:      "outside: restart empty, no delay",
		Plan:      plan(3, RestartEmpty),
		InProcess: 5, Resources: []string{"r0", "r1", "r2"},
		HoldMin: 20 * time.Millisecond, HoldMax: 80 * time.Millisecond,
	}
	jump := Workload{
		Name:      "outside: clock jump (simulated)",
		Plan:      plan(3, JumpClock),
		InProcess: 5, Resources: []string{"r0", "r1", "r2"},
		HoldMin: 20 * time.Millisecond, HoldMax: 80 * time.Millisecond,
	}
	pause := Workload{
		Name:      "outside: client paused past TTL",
		Plan:      plan(1, PauseClient),
		InProcess: 3, Subprocess: 2, Resources: []string{"r0", "r1"},
		HoldMin: 20 * time.Millisecond, HoldMax: 40 * time.Millisecond,
	}
	if docker {
		// A holder must still hold when the new containers answer.
		restart.Plan.TTL = 3 * time.Second
		restart.HoldMin, restart.HoldMax = 1200*time.Millisecond, 2200*time.Millisecond
		for _, w := range []*Workload{&inside, &handoff, &restart, &jump, &pause} {
			w.Name += " (docker)"
		}
	}
	if long {
		minSections, minD, maxD := 100000, 60*time.Second, 25*time.Minute
		if *sections > 0 {
			// 100-300 sections a second here: room for a loaded machine.
			minSections, minD, maxD = *sections, 10*time.Second, max(maxD, time.Duration(*sections/50)*time.Second)
		}
		return []Workload{
			lng(inside, minD, minSections, maxD),
			lng(handoff, minD, minSections, maxD),
			lng(restart, 60*time.Second, 0, 60*time.Second),
			lng(jump, 60*time.Second, 0, 60*time.Second),
			lng(pause, 60*time.Second, 0, 60*time.Second),
		}
	}
	return []Workload{short(inside, 12*time.Second), short(handoff, 8*time.Second), short(restart, 6*time.Second), short(jump, 6*time.Second), short(pause, 8*time.Second)}
}

// TestChaos runs every scenario, asserts what each must show, and prints
// the results table (make chaos: long).
func TestChaos(t *testing.T) {
	started := time.Now()
	var results []Result
	record := func(r Result) {
		r.Seed = seed
		visualise(t, &r, *jsonOut)
		results = append(results, r)
		t.Log(r)
	}
	for _, w := range forResource(workloads(*long, *backend == "docker")) {
		t.Run(w.Name, func(t *testing.T) {
			for _, f := range NewSchedule(ScheduleRand(seed, w.Name), w.Plan) {
				t.Logf("schedule: %s", f)
			}
			r := Run(t, w, seed, *backend)
			record(r)
			// Restarting masters empty at once also wipes fence counters,
			// outside fencing's assumption: report stale writes accepted
			// there, require 0 everywhere else.
			checkAlways(t, r)
			switch {
			case w.Inside:
				if r.Overlaps != 0 {
					t.Errorf("inside the assumptions: %d violations, want 0 (%d sections exited past their deadline: a client stalled longer than TTL breaks assumption 3); first: %s", r.Overlaps, r.Late, r.Example)
				}
				if r.Sections < w.MinSections {
					t.Errorf("%d critical sections, want ≥ %d", r.Sections, w.MinSections)
				}
				if w.Unfenced && !strings.Contains(r.Notes, "hand-offs: ") || strings.Contains(r.Notes, "hand-offs: 0 ") {
					t.Errorf("no key was handed to a waiting Locker: the run did not test the hand-off (%s)", r.Notes)
				}
			case slices.Contains(w.Plan.Kinds, PauseClient):
				// Every pause lands inside a section and lasts 2–3 TTL, so
				// the paused client exits past its deadline.
				if r.FaultsRun > 0 && r.Late == 0 {
					t.Errorf("%d client pauses but no section exited late: the pauses missed the sections", r.FaultsRun)
				}
			}
			if r.Sections == 0 {
				t.Errorf("no critical section completed")
			}
		})
	}
	constructed := []struct {
		name string
		run  func(testing.TB) Result
		// staleRejected: the old holder's late write must be rejected.
		staleRejected bool
	}{
		{"restart-empty/fence-back", func(tb testing.TB) Result { return RestartEmptyNoDelay(tb, 3) }, false},
		{"restart-empty/fence-repeats", func(tb testing.TB) Result { return RestartEmptyNoDelay(tb, 0) }, false},
		{"clock-jump", ClockJump, true},
		{"unsafe-single-master", UnsafeSingleMaster, false},
		{"kleppmann", Kleppmann, true},
		// Rejected patterns (docs/choosing.md): inside every assumption
		// about the masters, the fallback itself lets two holders in.
		{"unsafe-fallback/shadow-lock", ShadowLock, false},
		{"unsafe-fallback/circuit-breaker", CircuitBreakerFallback, false},
	}
	for _, c := range constructed {
		t.Run(c.name, func(t *testing.T) {
			r := c.run(t)
			record(r)
			checkAlways(t, r)
			// Outside the assumptions the checker must find the double
			// grant.
			if r.MutexOK != porcupine.Illegal || r.Overlaps < 1 || r.Porcupine != porcupine.Illegal {
				t.Errorf("checker missed the violation: mutex model %s, %d overlaps, porcupine %s", r.MutexOK, r.Overlaps, r.Porcupine)
			}
			if *jsonOut != "" && results[len(results)-1].Visualisation == "" {
				t.Errorf("no visualisation written for the failing row")
			}
			if !strings.Contains(r.Notes, "at once: true") {
				t.Errorf("the two holders did not both believe they held the lock: %s", r.Notes)
			}
			if c.name == "kleppmann" && !strings.Contains(r.Notes, "client 1 acquired on 3 of 5 (A, B, C), client 2 on 3 of 5 (C, D, E)") {
				t.Errorf("not the literal scenario: %s", r.Notes)
			}
			if c.staleRejected && r.StaleAttempted < 1 {
				t.Errorf("the stale holder's write was not rejected: %s", r.Notes)
			}
		})
	}

	var b bytes.Buffer
	Table(&b, results)
	fmt.Printf("chaos: seed=%d long=%v wall=%v\n%s", seed, *long, time.Since(started).Round(time.Second), b.String())
	if *jsonOut != "" {
		cmd := "go test ./tests/chaos -run 'TestChaos$' -chaos.seed=" + fmt.Sprint(seed) + map[bool]string{true: " -chaos.long", false: ""}[*long]
		s := Summary{
			Seed: seed, Long: *long, Started: started.UTC().Format(time.RFC3339),
			Command: cmd, Wall: time.Since(started).Round(time.Second).String(), Results: results,
		}
		if *backend != "process" {
			s.Backend = *backend
			s.Command += " -chaos.backend " + *backend
		}
		if *sections > 0 {
			s.Command += fmt.Sprintf(" -chaos.sections %d", *sections)
		}
		if *resourceKind != "redis" {
			s.Command += " -chaos.resource " + *resourceKind + " -chaos.pg.isolation " + *pgIsolation
		}
		if h, err := os.Hostname(); err == nil {
			s.Machine = fmt.Sprintf("%s: %d CPUs, %s/%s, %s", h, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
		}
		if err := WriteJSON(*jsonOut, s); err != nil {
			t.Error(err)
		}
	}
}

// checkAlways is what every scenario must show, inside the assumptions or
// not: the fenced resource never accepts a stale write (not even when fence
// counters were wiped: a repeated fence is accepted only from its owner),
// its log is a legal history of the fenced register, and porcupine agrees
// with the sweep.
func checkAlways(t *testing.T, r Result) {
	t.Helper()
	if r.StaleAccepted != 0 {
		t.Errorf("%d stale writes accepted by the fenced resource, want 0", r.StaleAccepted)
	}
	if r.WriteErrors != 0 {
		t.Errorf("%d fenced writes failed (the resource is never faulted)", r.WriteErrors)
	}
	if r.Writes > 0 && r.ResourceOK != porcupine.Ok {
		t.Errorf("resource log against the fenced-register model: %s, want Ok", r.ResourceOK)
	}
	if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[r.Overlaps == 0]; r.MutexOK != want {
		t.Errorf("porcupine's mutex model says %s but the sweep found %d overlaps", r.MutexOK, r.Overlaps)
	}
	if ours := oursClean(r.Verdict); (r.Porcupine == porcupine.Ok) != ours {
		t.Errorf("porcupine says %s over its models, our checks clean: %v (%d overlaps, %d fence regressions, %d stale accepted)",
			r.Porcupine, ours, r.Overlaps, r.FenceRegressions, r.StaleAccepted)
	}
}

// oursClean is our own checks' verdict on what porcupine's models judge:
// no overlap, fences increasing where the history is fenced, and no
// stale write accepted.
func oursClean(v Verdict) bool {
	return v.Overlaps == 0 && (v.FencedOK == "" || v.FenceRegressions == 0) && v.StaleAccepted == 0
}

// visualise writes porcupine's visualisation of a history it found
// illegal next to the results JSON (none without -chaos.json).
func visualise(t *testing.T, r *Result, jsonPath string) {
	t.Helper()
	if jsonPath == "" {
		return
	}
	if err := r.WriteVisualisation(VisualisationPath(jsonPath, r.Scenario)); err != nil {
		t.Error(err)
	}
}

// The checker on handmade histories: it must flag an overlap, pass a
// sequential history, and tell the fenced model from the plain one.
func TestChecker(t *testing.T) {
	sec := func(client int, res string, enter, exit int64, fence uint64) Section {
		return Section{Client: client, Resource: res, Enter: enter, Exit: exit, Fence: fence}
	}
	tests := []struct {
		name              string
		secs              []Section
		overlaps, regress int
		mutex, fenced     porcupine.CheckResult
	}{
		{"sequential", []Section{sec(1, "a", 0, 10, 1), sec(2, "a", 11, 20, 2), sec(1, "a", 25, 30, 3)}, 0, 0, porcupine.Ok, porcupine.Ok},
		{"overlap", []Section{sec(1, "a", 0, 10, 1), sec(2, "a", 5, 20, 2)}, 1, 0, porcupine.Illegal, porcupine.Illegal},
		{"nested overlap", []Section{sec(1, "a", 0, 100, 1), sec(2, "a", 10, 20, 2), sec(3, "a", 30, 40, 3)}, 2, 0, porcupine.Illegal, porcupine.Illegal},
		{"touching is not an overlap", []Section{sec(1, "a", 0, 10, 1), sec(2, "a", 10, 20, 2)}, 0, 0, porcupine.Ok, porcupine.Ok},
		{"overlap on different resources is fine", []Section{sec(1, "a", 0, 10, 1), sec(2, "b", 5, 20, 1)}, 0, 0, porcupine.Ok, porcupine.Ok},
		{"fence goes back", []Section{sec(1, "a", 0, 10, 5), sec(2, "a", 11, 20, 3)}, 0, 1, porcupine.Ok, porcupine.Illegal},
		{"fence repeats", []Section{sec(1, "a", 0, 10, 5), sec(2, "a", 11, 20, 5)}, 0, 1, porcupine.Ok, porcupine.Illegal},
		{"out of order input", []Section{sec(2, "a", 11, 20, 2), sec(1, "a", 0, 10, 1)}, 0, 0, porcupine.Ok, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.secs, nil)
			if v.Overlaps != tt.overlaps || v.FenceRegressions != tt.regress || v.MutexOK != tt.mutex || v.FencedOK != tt.fenced {
				t.Errorf("got overlaps %d, regressions %d, mutex %s, fenced %s; want %d, %d, %s, %s",
					v.Overlaps, v.FenceRegressions, v.MutexOK, v.FencedOK, tt.overlaps, tt.regress, tt.mutex, tt.fenced)
			}
		})
	}
}

// The resource log check: a write accepted after a larger fence had been
// accepted is counted and makes the register model illegal.
func TestCheckerResourceLog(t *testing.T) {
	good := []Write{
		{Client: 1, Resource: "a", Fence: 1, Call: 0, Return: 1, Accepted: true},
		{Client: 2, Resource: "a", Fence: 2, Call: 2, Return: 3, Accepted: true},
		{Client: 1, Resource: "a", Fence: 1, Call: 4, Return: 5, Stale: true},
	}
	v := Check(nil, good)
	if v.StaleAttempted != 1 || v.StaleAccepted != 0 || v.ResourceOK != porcupine.Ok {
		t.Errorf("good log: attempted %d accepted %d model %s; want 1, 0, Ok", v.StaleAttempted, v.StaleAccepted, v.ResourceOK)
	}
	bad := append(good[:2:2], Write{Client: 1, Resource: "a", Fence: 1, Call: 4, Return: 5, Accepted: true})
	v = Check(nil, bad)
	if v.StaleAccepted != 1 || v.ResourceOK != porcupine.Illegal {
		t.Errorf("bad log: accepted %d model %s; want 1, Illegal", v.StaleAccepted, v.ResourceOK)
	}
	// Equal fences from two overlapping holders (wiped counters): the new
	// holder's write with the old holder's fence is rejected, and the old
	// holder's later write, same fence and owner, is accepted: consistent.
	secs2 := []Section{
		{Client: 1, Seq: 1, Resource: "a", Enter: 0, Exit: 50, Fence: 1},
		{Client: 2, Seq: 1, Resource: "a", Enter: 10, Exit: 30, Fence: 1},
	}
	ws2 := []Write{
		{Client: 1, Seq: 1, Resource: "a", Fence: 1, Owner: "A", Call: 1, Return: 2, Accepted: true},
		{Client: 2, Seq: 1, Resource: "a", Fence: 1, Owner: "B", Call: 11, Return: 12, Stale: true},
		{Client: 1, Seq: 1, Resource: "a", Fence: 1, Owner: "A", Call: 40, Return: 41, Accepted: true},
	}
	if v := Check(secs2, ws2); v.StaleAccepted != 0 || v.ResourceOK != porcupine.Ok || v.FenceReuse != 1 {
		t.Errorf("equal fences: stale accepted %d, resource model %s, reuse %d; want 0, Ok, 1", v.StaleAccepted, v.ResourceOK, v.FenceReuse)
	}
	// Had the resource let the other owner's equal fence through, the
	// register model says so.
	ws2[1].Stale, ws2[1].Accepted = false, true
	if v := Check(secs2, ws2); v.ResourceOK != porcupine.Illegal {
		t.Errorf("equal fence from another owner accepted: resource model %s, want Illegal", v.ResourceOK)
	}
	// A fence sent backwards (wiped counters): the resource rejects the
	// only holder, which is counted apart from stale holders.
	secs := []Section{
		{Client: 1, Seq: 1, Resource: "a", Enter: 0, Exit: 10, Fence: 5},
		{Client: 2, Seq: 1, Resource: "a", Enter: 20, Exit: 30, Fence: 2},
	}
	ws := []Write{
		{Client: 1, Seq: 1, Resource: "a", Fence: 5, Call: 1, Return: 2, Accepted: true},
		{Client: 2, Seq: 1, Resource: "a", Fence: 2, Call: 21, Return: 22, Stale: true},
	}
	if v := Check(secs, ws); v.StaleAttempted != 1 || v.RejectedExclusive != 1 || v.Overlaps != 0 || v.FencedOK != porcupine.Illegal {
		t.Errorf("fence regression: attempted %d, by the only holder %d, overlaps %d, fenced model %s; want 1, 1, 0, Illegal",
			v.StaleAttempted, v.RejectedExclusive, v.Overlaps, v.FencedOK)
	}
	// A write whose client was killed during it (the election's killed
	// leaders) may have landed or not: the register model takes either,
	// and still flags a stale write accepted after it.
	inFlight := []Write{
		{Client: 1, Seq: 1, Resource: "a", Fence: 5, Owner: "A", Call: 0, Return: 1, Accepted: true},
		{Client: 2, Seq: 1, Resource: "a", Fence: 6, Owner: "B", Call: 2, Return: math.MaxInt64, Unknown: true},
		{Client: 3, Seq: 1, Resource: "a", Fence: 7, Owner: "C", Call: 3, Return: 4, Accepted: true},
	}
	if v := Check(nil, inFlight); v.InFlight != 1 || v.WriteErrors != 0 || v.ResourceOK != porcupine.Ok {
		t.Errorf("write in flight: in flight %d, errors %d, model %s; want 1, 0, Ok", v.InFlight, v.WriteErrors, v.ResourceOK)
	}
	inFlight = append(inFlight, Write{Client: 1, Seq: 1, Resource: "a", Fence: 5, Owner: "A", Call: 5, Return: 6, Accepted: true})
	if v := Check(nil, inFlight); v.ResourceOK != porcupine.Illegal || v.StaleAccepted != 1 {
		t.Errorf("stale write accepted after a write in flight: model %s, stale accepted %d; want Illegal, 1", v.ResourceOK, v.StaleAccepted)
	}
	// A wrongly rejected write (fence not lower) is illegal too.
	wrong := append(good[:2:2], Write{Client: 3, Resource: "a", Fence: 3, Call: 4, Return: 5, Stale: true})
	if v := Check(nil, wrong); v.ResourceOK != porcupine.Illegal {
		t.Errorf("wrongly rejected write: model %s, want Illegal", v.ResourceOK)
	}
}

// A seed reproduces the fault schedule.
func TestScheduleReplay(t *testing.T) {
	for _, w := range append(workloads(true, false), workloads(true, true)...) {
		a := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
		b := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two schedules from seed %d differ (or are empty): %d vs %d faults", w.Name, seed, len(a), len(b))
		}
		if c := NewSchedule(ScheduleRand(seed+1, w.Name), w.Plan); reflect.DeepEqual(a, c) {
			t.Errorf("%s: seeds %d and %d give the same schedule", w.Name, seed, seed+1)
		}
		for _, f := range a {
			if len(f.Masters) > w.Plan.MaxFaulted {
				t.Errorf("%s: %s faults more than %d masters", w.Name, f, w.Plan.MaxFaulted)
			}
			if f.Kind == KillDelayed && f.Dur < w.Plan.TTL {
				t.Errorf("%s: %s restarts before a TTL has passed", w.Name, f)
			}
			if f.Kind == Latency && 2*f.Delta >= w.Plan.MasterTimeout {
				t.Errorf("%s: %s: round trip not below MasterTimeout %v", w.Name, f, w.Plan.MasterTimeout)
			}
		}
	}
}
