package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The election flags: defaults, bounds, and the scenarios need an
// implementation with an election.
func TestElectionFlags(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.electionTTL != 2*time.Second || cfg.campaigners != 3 || cfg.failovers != 5 {
		t.Errorf("defaults: election TTL %v, %d campaigners, %d failovers", cfg.electionTTL, cfg.campaigners, cfg.failovers)
	}
	if slices.ContainsFunc(cfg.scenarios, isElectionScenario) {
		t.Errorf("default scenarios %v include an election scenario (they run only when named)", cfg.scenarios)
	}
	if p := plan(&config{scenarios: []string{handoverScenario, "uncontended", failoverScenario}, impls: []string{"redlock"}, workers: []int{1}}); len(p) != 1 {
		t.Errorf("plan has %d cells, want 1: the election scenarios are not cells", len(p))
	}
	for _, bad := range [][]string{
		{"-election-ttl", "1500ms"},
		{"-election-ttl", "0s"},
		{"-campaigners", "1"},
		{"-campaigners", "65"},
		{"-failovers", "0"},
		{"-scenarios", "election-handover", "-impls", "redsync,single"},
	} {
		var ue *usageError
		if _, err := parseFlags(bad, io.Discard); !errors.As(err, &ue) {
			t.Errorf("parseFlags(%q) = %v, want a usage error", bad, err)
		}
	}
	cfg, err = parseFlags([]string{"-scenarios", "election-failover,uncontended", "-impls", "single,redlock", "-election-ttl", "3s"}, io.Discard)
	if err != nil || !slices.Equal(cfg.electionImpls(), []string{"redlock"}) || cfg.electionTTL != 3*time.Second {
		t.Errorf("parseFlags: %+v, %v", cfg, err)
	}
}

// syntheticElections is an election-handover and -failover row per
// implementation, and the etcd cluster, on the synthetic report.
func syntheticElections() *Report {
	rep := syntheticReport()
	rep.Etcd = &EtcdInfo{Version: "3.4.23", Members: 3, Endpoints: []string{"http://127.0.0.1:1"}, Note: "three members"}
	rep.Config.ElectionTTLMs, rep.Config.Campaigners, rep.Config.Failovers = 2000, 3, 2
	d := func(p50, max float64) Dist {
		return Dist{Count: 2, P50: p50, P90: max, P99: max, Max: max, Mean: (p50 + max) / 2}
	}
	rep.Elections = []ElectionResult{
		{Scenario: handoverScenario, Impl: "redlock", Campaigners: 3, TTLMs: 2000, LatencyMs: d(1, 2), Failures: map[string]int64{}, Notes: []string{}},
		{Scenario: handoverScenario, Impl: "etcd", Campaigners: 3, TTLMs: 2000, LatencyMs: d(4, 8), Failures: map[string]int64{"ctx": 1}, Notes: []string{"lease"}},
		{Scenario: failoverScenario, Impl: "redlock", Campaigners: 3, TTLMs: 2000, LatencyMs: d(1800, 2000), SamplesMs: []float64{2000, 1800},
			Failures: map[string]int64{}, Notes: []string{}},
		{Scenario: failoverScenario, Impl: "etcd", Campaigners: 3, TTLMs: 2000, LatencyMs: d(1500, 2000), SamplesMs: []float64{1500, 2000},
			Failures: map[string]int64{}, Notes: []string{}},
	}
	rep.Results = append(rep.Results, Result{Scenario: "contended", Impl: "etcd", Workers: 8, DurationSeconds: 5, Ops: 1, OpsPerSec: 0.2,
		AcquireMs: Dist{Count: 1, P50: 9, P90: 9, P99: 9, Max: 9, Mean: 9}, Failures: map[string]int64{},
		Validity: Validity{Source: sourceNone}, Phases: []PhaseResult{{Name: "all", Seconds: 5, Ops: 1, OpsPerSec: 0.2}}, Notes: []string{}})
	rep.Ratios = computeRatios(rep.Results)
	return rep
}

// The schema takes the elections, the etcd cluster and a result without
// validity; the table prints them, with ours ÷ etcd per scenario.
func TestElectionReport(t *testing.T) {
	rep := syntheticElections()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	got := checkJSON(t, b)
	if len(got.Elections) != 4 || got.Etcd == nil || got.Elections[0].SamplesMs != nil || len(got.Elections[2].SamplesMs) != 2 {
		t.Fatalf("round trip: %+v, %+v", got.Elections, got.Etcd)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["elections"].([]any)[0].(map[string]any)["scenario"] = "election-coup"
	b2, _ := json.Marshal(m)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b2))
	if compileSchema(t).Validate(inst) == nil {
		t.Error("schema accepted an unknown election scenario")
	}

	var out bytes.Buffer
	if err := renderTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"etcd:    three members", "elections: latency (ms)",
		"election-handover: redlock ÷ etcd  p50 0.25× (1.00 ÷ 4.00 ms)  p99 0.25× (2.00 ÷ 8.00 ms)",
		"election-failover: redlock ÷ etcd  p50 1.20× (1800 ÷ 1500 ms)  max 1.00× (2000 ÷ 2000 ms)",
		"election-failover redlock rounds (ms, in run order): 2000 1800", "note: election-handover/etcd: lease", "ctx:1",
		"bounded by the TTL"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	// etcd's row: no validity, "-".
	for l := range strings.Lines(s) {
		if f := strings.Fields(l); len(f) > 10 && f[0] == "contended" && f[2] == "etcd" && f[8] != "-" {
			t.Errorf("etcd's row shows a validity: %q", l)
		}
	}
}

// fakeElection is an in-process election: a token passed through a
// channel.
type fakeElection struct{ token chan struct{} }

type fakeCampaigner struct{ e *fakeElection }

func (c fakeCampaigner) campaign(ctx context.Context, _ string) error {
	select {
	case <-c.e.token:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c fakeCampaigner) resign(context.Context) error {
	time.Sleep(time.Millisecond)
	c.e.token <- struct{}{}
	return nil
}

func (fakeCampaigner) close() error { return nil }

// handoverRun measures Resign to the next Campaign's return, with every
// campaigner in turn, and stops at the end of its time.
func TestHandoverRun(t *testing.T) {
	e := &fakeElection{token: make(chan struct{}, 1)}
	e.token <- struct{}{}
	spec := electionSpec{name: "fake", open: func(electionEnv, string) (campaigner, error) { return fakeCampaigner{e}, nil }}
	var s electionSamples
	began := time.Now()
	if err := handoverRun(t.Context(), spec, electionEnv{ttl: time.Second}, "x", 3, 300*time.Millisecond, &s); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(began); el > 2*time.Second {
		t.Errorf("handoverRun took %v for 300 ms", el)
	}
	r := s.result(handoverScenario, "fake", 3, false)
	// Each term is handoverHold (10 ms) and a hand-over ≥ 1 ms.
	if r.LatencyMs.Count < 5 || r.LatencyMs.P50 < 1 || len(r.Failures) != 0 || r.TTLMs != 1000 {
		t.Errorf("result %+v", r)
	}
}

// A failover round's leader: it campaigns as its environment says, prints
// that it leads, and resigns when its stdin closes; a bad spec is exit 2.
func TestChildCampaignerBadSpec(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runChildCampaigner("{", strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), childCampaignerEnv) {
		t.Errorf("bad JSON: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := runChildCampaigner(`{"impl":"nope"}`, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), `"nope"`) {
		t.Errorf("unknown impl: exit %d, stderr %q", code, errb.String())
	}
}

// TestSmokeElectionsOurs runs both election scenarios for ours on real
// masters: hand-overs happen, and a failover (a child process SIGKILLed)
// takes about the TTL.
func TestSmokeElectionsOurs(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	path := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-impls", "redlock", "-scenarios", "election-handover,election-failover", "-duration", "1s", "-failovers", "1",
		"-election-ttl", "1s", "-q", "-json", path}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkElections(t, checkJSON(t, b), []string{"redlock"}, time.Second)
}

// checkElections: each implementation has a hand-over row with hand-overs
// and a failover row with one round that waited for the dead leader's TTL
// (at least a quarter of it, however late in its extension cycle the kill
// fell) and not much longer.
func checkElections(t *testing.T, rep *Report, impls []string, ttl time.Duration) {
	t.Helper()
	for _, im := range impls {
		h, ok := findElection(rep.Elections, handoverScenario, im)
		if !ok || h.LatencyMs.Count == 0 || h.Campaigners != 3 {
			t.Errorf("%s hand-over: %+v (found %v)", im, h, ok)
		}
		f, ok := findElection(rep.Elections, failoverScenario, im)
		if !ok || f.LatencyMs.Count != 1 || len(f.SamplesMs) != 1 {
			t.Errorf("%s failover: %+v (found %v)", im, f, ok)
			continue
		}
		lease := time.Duration(f.TTLMs) * time.Millisecond // etcd's as granted: it may be above ttl
		if l := time.Duration(f.LatencyMs.Max * float64(time.Millisecond)); l < max(ttl, lease)/4 || l > 2*max(ttl, lease)+time.Second {
			t.Errorf("%s failover took %v with a TTL of %v (granted %v)", im, l, ttl, lease)
		}
	}
}

// instantCampaigner leads at once: in a failover round, before the
// leader is killed.
type instantCampaigner struct{}

func (instantCampaigner) campaign(context.Context, string) error { return nil }
func (instantCampaigner) resign(context.Context) error           { return nil }
func (instantCampaigner) close() error                           { return nil }

// A failover round whose campaigner leads before the kill fails, and
// ends its leader process rather than waiting for it: the leader waits
// for its stdin to close, so waiting alone would never return.
func TestFailoverRoundEndsALeaderNeverKilled(t *testing.T) {
	ms, err := startEmbedded(t.Context(), 3, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.shutdown()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child, err := childMasters(ms.opts)
	if err != nil {
		t.Fatal(err)
	}
	env := electionEnv{masters: ms.opts, ttl: 2 * time.Second}
	cs := childSpec{Impl: "redlock", Election: "never-killed", Value: "child", TTLMs: env.ttl.Milliseconds(), Masters: child}
	es := electionSpec{name: "instant", open: func(electionEnv, string) (campaigner, error) { return instantCampaigner{}, nil }}
	done := make(chan error, 1)
	go func() { _, err := failoverRound(t.Context(), exe, cs, es, env, 2, &electionSamples{}); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "before the leader was killed") {
			t.Errorf("round: %v, want a campaigner leading before the kill", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("failoverRound still waiting for its leader 30 s on")
	}
}
