package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The bench re-executes this binary as its children (child.go).
	if code, ok := asChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{7}, 99, 7},
		{"p0 is the minimum", hundred, 0, 1},
		{"p1 of 100", hundred, 1, 1},
		{"p50 of 100", hundred, 50, 50},
		{"p90 of 100", hundred, 90, 90},
		{"p99 of 100", hundred, 99, 99},
		{"p100 is the maximum", hundred, 100, 100},
		{"nearest rank rounds up", []float64{1, 2, 3}, 50, 2},
		{"p99 of 3 is the max", []float64{1, 2, 3}, 99, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestDistOf(t *testing.T) {
	d := distOf(durationsMs([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}))
	want := Dist{Count: 4, P50: 2, P90: 10, P99: 10, Max: 10, Mean: 4}
	if d != want {
		t.Errorf("distOf = %+v, want %+v", d, want)
	}
	if z := distOf(nil); z != (Dist{}) {
		t.Errorf("distOf(nil) = %+v, want zero", z)
	}
}

func TestValidityOf(t *testing.T) {
	ttl := 10 * time.Second
	vs := []validitySample{
		{left: 9898 * time.Millisecond, elapsed: 0, drift: 102 * time.Millisecond},
		{left: 9000 * time.Millisecond, elapsed: 898 * time.Millisecond, drift: 102 * time.Millisecond},
		{left: 9890 * time.Millisecond, elapsed: 8 * time.Millisecond, drift: 102 * time.Millisecond},
	}
	v, fr := validityOf("acquisition", ttl, vs)
	if v.Count != 3 || v.Min != 0.9 || v.P1 != 0.9 || v.P50 != 0.989 || v.ElapsedMsP50 != 8 || v.DriftMs != 102 || v.SafetyMarginMs != 0 {
		t.Errorf("validityOf = %+v", v)
	}
	if !slices.IsSorted(fr) || len(fr) != 3 {
		t.Errorf("samples %v: want 3 sorted", fr)
	}
}

func TestParseFlags(t *testing.T) {
	good := []struct {
		name  string
		args  []string
		check func(*config) bool
	}{
		{"defaults", nil, func(c *config) bool {
			return c.masters == 5 && slices.Equal(c.workers, []int{8}) && c.duration == 3*time.Second && c.ttl == 10*time.Second &&
				slices.Equal(c.impls, []string{"redlock", "redsync", "redsync-failfast", "single"}) &&
				slices.Equal(c.scenarios, []string{"uncontended", "contended", "stall"})
		}},
		{"selection keeps the known order", []string{"-scenarios", "stall,uncontended", "-impls", "single,redlock"}, func(c *config) bool {
			return slices.Equal(c.scenarios, []string{"uncontended", "stall"}) && slices.Equal(c.impls, []string{"redlock", "single"})
		}},
		{"addrs set masters", []string{"-addrs", "127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003"}, func(c *config) bool {
			return c.masters == 3 && len(c.addrs) == 3 && c.addrs[1] == "127.0.0.1:7002"
		}},
		{"all", []string{"-scenarios", "all", "-impls", "all"}, func(c *config) bool {
			return len(c.impls) == 4 && slices.Contains(c.scenarios, "fencing")
		}},
		{"other clients only when named", []string{"-impls", "redlock-viaclient,redlock,redlock-url"}, func(c *config) bool {
			return slices.Equal(c.impls, []string{"redlock", "redlock-url", "redlock-viaclient"})
		}},
		{"one worker count", []string{"-workers", "64"}, func(c *config) bool { return slices.Equal(c.workers, []int{64}) }},
		{"worker sweep keeps the order given", []string{"-workers", "64, 1,8,256"}, func(c *config) bool {
			return slices.Equal(c.workers, []int{64, 1, 8, 256})
		}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatalf("parseFlags(%q): %v", tt.args, err)
			}
			if !tt.check(c) {
				t.Errorf("parseFlags(%q) = %+v", tt.args, c)
			}
		})
	}
	bad := []struct {
		name, want string
		args       []string
	}{
		{"unknown scenario", "unknown name \"nope\"", []string{"-scenarios", "uncontended,nope"}},
		{"unknown impl", "known: redlock", []string{"-impls", "nope"}},
		{"zero workers", `-workers: "0" must be at least 1`, []string{"-workers", "0"}},
		{"negative workers", `-workers: "-3" must be at least 1`, []string{"-workers", "-3"}},
		{"bad entry in a sweep", `-workers: "x" is not a whole number`, []string{"-workers", "1,x,8"}},
		{"empty entry in a sweep", "-workers: empty entry", []string{"-workers", "1,,8"}},
		{"too many workers", `-workers: "5000" is more than the maximum of 4096`, []string{"-workers", "8,5000"}},
		{"short duration", "-duration", []string{"-duration", "1ms"}},
		{"sub-ms ttl", "-ttl", []string{"-ttl", "1500us"}},
		{"unknown flag", "not defined", []string{"-bogus"}},
		{"bad addr", "not host:port", []string{"-addrs", "localhost"}},
		{"duplicate addr", "twice", []string{"-addrs", "a:1,a:1"}},
		{"addrs and embedded", "exclude", []string{"-addrs", "a:1", "-embedded"}},
		{"masters contradicts addrs", "contradicts", []string{"-addrs", "a:1,b:2", "-masters", "5"}},
		{"stray argument", "unexpected argument", []string{"extra"}},
		{"zero repeat", "-repeat must be from 1 to 99", []string{"-repeat", "0"}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseFlags(%q) = %v, want a usage error", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		var out bytes.Buffer
		_, err := parseFlags([]string{"-h"}, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("-h: %v, want flag.ErrHelp", err)
		}
		for _, s := range []string{"-addrs", "-workers", "-scenarios", "stall", "redsync-failfast", "embedded"} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("-h output does not mention %q", s)
			}
		}
	})
}

func TestParseWorkers(t *testing.T) {
	good := []struct {
		in   string
		want []int
	}{
		{"8", []int{8}},
		{"1,8,64,256", []int{1, 8, 64, 256}},
		{" 256 , 1 ", []int{256, 1}},
		{"+4", []int{4}},
		{"4096", []int{4096}},
	}
	for _, tt := range good {
		got, err := parseWorkers(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseWorkers(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	// Every bad list is a usage error that names the bad entry.
	bad := []struct{ in, want string }{
		{"", "empty entry"},
		{" ", "empty entry"},
		{"1,,8", `empty entry in "1,,8"`},
		{"8,", `empty entry in "8,"`},
		{",8", `empty entry in ",8"`},
		{"0", `"0" must be at least 1`},
		{"1,-8", `"-8" must be at least 1`},
		{"-99999999999999999999", `"-99999999999999999999" must be at least 1`},
		{"eight", `"eight" is not a whole number`},
		{"1.5", `"1.5" is not a whole number`},
		{"1e3", `"1e3" is not a whole number`},
		{"0x10", `"0x10" is not a whole number`},
		{"8 16", `"8 16" is not a whole number`},
		{"4097", `"4097" is more than the maximum of 4096`},
		{"1,99999999999999999999", `"99999999999999999999" is more than the maximum of 4096`},
		{"8,1,8", `"8" is listed twice`},
	}
	for _, tt := range bad {
		got, err := parseWorkers(tt.in)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseWorkers(%q) = %v, %v; want a usage error", tt.in, got, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "-workers: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseWorkers(%q): error %q does not mention %q", tt.in, err, tt.want)
		}
	}
}

func TestUnreachableAddrIsUsageError(t *testing.T) {
	// Port 1 on loopback: nothing listens there, so the dial is refused.
	err := run(t.Context(), []string{"-addrs", "127.0.0.1:1", "-duration", "100ms", "-q"}, io.Discard, io.Discard)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("run with an unreachable master = %v, want a usage error saying unreachable", err)
	}
}

func TestComputeRatios(t *testing.T) {
	res := []Result{
		{Scenario: "uncontended", Impl: "redlock", Workers: 8, OpsPerSec: 300, Phases: []PhaseResult{{Name: "all", OpsPerSec: 300}}},
		{Scenario: "uncontended", Impl: "redsync", Workers: 8, OpsPerSec: 100, Phases: []PhaseResult{{Name: "all", OpsPerSec: 100}}},
		{Scenario: "stall", Impl: "redlock", Workers: 8, OpsPerSec: 90, Phases: []PhaseResult{{Name: "healthy", OpsPerSec: 100}, {Name: "1 stopped", OpsPerSec: 95}}},
		{Scenario: "stall", Impl: "redsync", Workers: 8, OpsPerSec: 50, Phases: []PhaseResult{{Name: "healthy", OpsPerSec: 100}, {Name: "1 stopped", OpsPerSec: 0}}},
		// A second worker count: its ratios pair only its own cells.
		{Scenario: "uncontended", Impl: "redlock", Workers: 64, OpsPerSec: 1000, Phases: []PhaseResult{{Name: "all", OpsPerSec: 1000}}},
		{Scenario: "uncontended", Impl: "redsync", Workers: 64, OpsPerSec: 125, Phases: []PhaseResult{{Name: "all", OpsPerSec: 125}}},
		// Ours did not run with 2 workers: no ours ÷ redsync ratio there.
		{Scenario: "uncontended", Impl: "redsync", Workers: 2, OpsPerSec: 40, Phases: []PhaseResult{{Name: "all", OpsPerSec: 40}}},
	}
	rs := computeRatios(res)
	check := func(sc string, w int, ni, np, di, dp string, want *float64) {
		t.Helper()
		r, ok := findRatio(rs, sc, w, ni, np, di, dp)
		switch {
		case !ok:
			t.Errorf("no ratio %s %dw %s/%s ÷ %s/%s", sc, w, ni, np, di, dp)
		case r.Workers != w:
			t.Errorf("%s %dw %s/%s ÷ %s/%s has workers %d", sc, w, ni, np, di, dp, r.Workers)
		case want == nil && r.Value != nil:
			t.Errorf("%s %dw %s/%s ÷ %s/%s = %v, want null", sc, w, ni, np, di, dp, *r.Value)
		case want != nil && (r.Value == nil || *r.Value != *want):
			t.Errorf("%s %dw %s/%s ÷ %s/%s = %v, want %v", sc, w, ni, np, di, dp, r.Value, *want)
		}
	}
	f := func(v float64) *float64 { return &v }
	check("uncontended", 8, "redlock", "all", "redsync", "all", f(3))
	check("uncontended", 64, "redlock", "all", "redsync", "all", f(8))
	check("stall", 8, "redlock", "all", "redsync", "all", f(1.8))
	check("stall", 8, "redlock", "healthy", "redsync", "healthy", f(1))
	check("stall", 8, "redlock", "1 stopped", "redsync", "1 stopped", nil)
	check("stall", 8, "redlock", "1 stopped", "redlock", "healthy", f(0.95))
	check("stall", 8, "redsync", "1 stopped", "redsync", "healthy", f(0))
	if _, ok := findRatio(rs, "uncontended", 8, "redsync", "all", "redlock", "all"); ok {
		t.Error("ratios should put ours in the numerator only")
	}
	if _, ok := findRatio(rs, "uncontended", 2, "redlock", "all", "redsync", "all"); ok {
		t.Error("a ratio for 2 workers, where ours did not run")
	}
	for _, r := range rs {
		if r.Scenario == "uncontended" && (r.Numerator.OpsPerSec == 300) != (r.Workers == 8) {
			t.Errorf("ratio %+v pairs cells of different worker counts", r)
		}
	}
	if n := len(rs); n != 7 {
		t.Errorf("%d ratios, want 7: %+v", n, rs)
	}
	if got := fmtRatio(Ratio{Numerator: Side{OpsPerSec: 5}}); got != "∞ (0 ops)" {
		t.Errorf("fmtRatio over zero = %q", got)
	}
}

// syntheticReport has every shape the schema must accept: a null handoff,
// a non-null one, a null ratio, failures, notes, phases, two worker counts,
// command counts and PING round trips both present and null.
func syntheticReport() *Report {
	rep := &Report{
		SchemaVersion: schemaVersion, Tool: "redlock-bench", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		WallSeconds: 12.5, Env: Env{GoVersion: "go1.26", GOOS: "linux", GOARCH: "amd64", CPUs: 2},
		Masters: Masters{Kind: "embedded", N: 5, Addrs: []string{"127.0.0.1:1"}, StallMethod: "mutex", Note: "EMBEDDED"},
		Config: Config{Workers: []int{8, 1}, DurationSeconds: 5, TTLMs: 10000, Scenarios: []string{"contended", "stall"},
			Impls: []string{"redlock", "redsync", "redsync-failfast"}},
	}
	rep.Scenarios = []ScenarioInfo{
		{Name: "contended", Description: "d", Available: true, Phases: []PhaseInfo{{Name: "all", From: 0, To: 1, PausedMasters: []int{}}}},
		{Name: "stall", Description: "d", Available: true, Phases: []PhaseInfo{{Name: "healthy", From: 0, To: 0.5, PausedMasters: []int{}}, {Name: "1 stopped", From: 0.5, To: 1, PausedMasters: []int{0}}}},
		{Name: "fencing", Description: "d", Available: false, Unavailable: "no field", Phases: []PhaseInfo{}},
	}
	h := Dist{Count: 3, P50: 1, P90: 2, P99: 3, Max: 3, Mean: 2}
	rep.Results = []Result{
		{Scenario: "contended", Impl: "redlock", Workers: 8, DurationSeconds: 5, Ops: 10, OpsPerSec: 2, AcquireMs: h, HandoffMs: &h,
			Failures: map[string]int64{}, Validity: Validity{Source: "acquisition", Count: 3, Min: 0.98, P1: 0.98, P50: 0.99, DriftMs: 102},
			Phases: []PhaseResult{{Name: "all", Seconds: 5, Ops: 10, OpsPerSec: 2}}, Notes: []string{}},
		{Scenario: "stall", Impl: "redlock", Workers: 8, DurationSeconds: 5, Ops: 10, OpsPerSec: 2, AcquireMs: h,
			Failures: map[string]int64{"not_acquired": 2}, Validity: Validity{Source: "acquisition"},
			Phases: []PhaseResult{{Name: "healthy", Seconds: 2.5, Ops: 10, OpsPerSec: 4}, {Name: "1 stopped", Seconds: 2.5}}, Notes: []string{"n"}},
		{Scenario: "stall", Impl: "redsync", Workers: 8, DurationSeconds: 5, LateOps: 3, AcquireMs: Dist{}, Failures: map[string]int64{},
			Validity: Validity{Source: "until"}, Phases: []PhaseResult{{Name: "healthy", Seconds: 2.5}, {Name: "1 stopped", Seconds: 2.5}}, Notes: []string{}},
		{Scenario: "contended", Impl: "redsync-failfast", Workers: 8, DurationSeconds: 5, Ops: 5, OpsPerSec: 1, AcquireMs: Dist{Count: 5, P50: 4, P90: 4, P99: 4, Max: 4, Mean: 4},
			HandoffMs: &h, Failures: map[string]int64{}, Validity: Validity{Source: "until"},
			Phases: []PhaseResult{{Name: "all", Seconds: 5, Ops: 5, OpsPerSec: 1}}, Notes: []string{}},
		{Scenario: "contended", Impl: "redlock", Workers: 1, DurationSeconds: 5, Ops: 30, OpsPerSec: 6, AcquireMs: h, HandoffMs: &h,
			Failures: map[string]int64{}, Validity: Validity{Source: "acquisition"},
			Phases: []PhaseResult{{Name: "all", Seconds: 5, Ops: 30, OpsPerSec: 6}}, Notes: []string{}},
		{Scenario: "contended", Impl: "redsync-failfast", Workers: 1, DurationSeconds: 5, Ops: 20, OpsPerSec: 4, AcquireMs: h, HandoffMs: &h,
			Failures: map[string]int64{}, Validity: Validity{Source: "until"},
			Phases: []PhaseResult{{Name: "all", Seconds: 5, Ops: 20, OpsPerSec: 4}}, Notes: []string{}},
	}
	// The masters' side: counted and measured (contended at 8 workers),
	// counted with no successful Lock (stall/redsync), and not reported
	// (stall/redlock and contended at 1 worker: null).
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	rs := rep.Results
	rs[0].Commands, rs[0].CommandsByName, rs[0].CommandsPerAcquisition = i64(36), map[string]int64{"set": 18, "evalsha": 6, "get": 6, "del": 6}, f64(12)
	rs[0].PingRTTMs, rs[0].PingRTTPerMasterMs, rs[0].PingRTTLoadedMs = f64(0.5), []float64{0.4, 0.5, 0.6, 0.5, 0.7}, f64(2)
	rs[2].Commands, rs[2].CommandsByName = i64(7), map[string]int64{"set": 7}
	rs[2].PingRTTMs, rs[2].PingRTTPerMasterMs = f64(0.3), []float64{0.3}
	rs[3].Commands, rs[3].CommandsByName, rs[3].CommandsPerAcquisition = i64(15), map[string]int64{"set": 10, "evalsha": 5}, f64(3)
	rs[0].WorkerFairness, rs[0].RetakenShare = f64(0.8), f64(0.02)
	rs[3].WorkerFairness, rs[3].RetakenShare = f64(0.1), f64(0.9)
	rs[3].PingRTTMs, rs[3].PingRTTPerMasterMs = f64(0.25), []float64{0.25}
	rep.Ratios = computeRatios(rep.Results)
	return rep
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		t.Fatalf("schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "https://github.com/quorumlab/redlock/cmd/redlock-bench/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compiling schema.json: %v", err)
	}
	return s
}

// checkJSON validates b against schema.json and decodes it strictly into
// Report, so the schema and the Go struct cannot drift apart silently.
func checkJSON(t *testing.T, b []byte) *Report {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if err := compileSchema(t).Validate(inst); err != nil {
		t.Fatalf("output does not match schema.json: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output does not decode strictly into Report: %v", err)
	}
	return &rep
}

func TestSchemaAcceptsReport(t *testing.T) {
	b, err := json.Marshal(syntheticReport())
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.Results[0].HandoffMs == nil || rep.Results[1].HandoffMs != nil {
		t.Errorf("handoff_latency_ms round trip: %+v / %+v", rep.Results[0].HandoffMs, rep.Results[1].HandoffMs)
	}
}

func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	good, err := json.Marshal(syntheticReport())
	if err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(m map[string]any){
		"version 1": func(m map[string]any) { m["schema_version"] = 1 },
		"config workers as one number": func(m map[string]any) {
			m["config"].(map[string]any)["workers"] = 8
		},
		"no config workers": func(m map[string]any) {
			m["config"].(map[string]any)["workers"] = []any{}
		},
		"zero workers": func(m map[string]any) {
			m["config"].(map[string]any)["workers"] = []any{0}
		},
		"result without workers": func(m map[string]any) {
			delete(m["results"].([]any)[0].(map[string]any), "workers")
		},
		"ratio without workers": func(m map[string]any) {
			delete(m["ratios"].([]any)[0].(map[string]any), "workers")
		},
		"missing results": func(m map[string]any) { delete(m, "results") },
		"extra field":     func(m map[string]any) { m["surprise"] = true },
		"bad kind":        func(m map[string]any) { m["masters"].(map[string]any)["kind"] = "cloud" },
		"negative ops": func(m map[string]any) {
			m["results"].([]any)[0].(map[string]any)["ops"] = -1
		},
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(good, &m); err != nil {
				t.Fatal(err)
			}
			mutate(m)
			b, _ := json.Marshal(m)
			inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if s.Validate(inst) == nil {
				t.Errorf("schema accepted a report with %s", name)
			}
		})
	}
}

func TestRenderTable(t *testing.T) {
	var out bytes.Buffer
	if err := renderTable(&out, syntheticReport()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"EMBEDDED MASTERS", "workers 8,1 ·", "not run: fencing (no field)", "contended", "stall: ops/s per phase",
		"1 stopped ÷ healthy", "8w redlock ÷ redsync: healthy", "∞ (0 ops)", "not_acquired:2", "handoff", "note: stall/redlock/8w: n",
		// Ours ÷ failfast per worker count, in -workers order: 2/1 and 6/4
		// ops/s, p99, fairness and retaken share (where both have them)
		// before p50 on a shared resource (p50 1/4 and 1/1 ms), and the
		// line on why.
		"\ncontended: redlock ÷ redsync-failfast  8w 2.00× (p99 0.75×, fairness 0.80 against 0.10, retaken 2% against 90%; p50 0.25×)  1w 1.50× (p99 1.00×; p50 1.00×)\n",
		"has a low acquire p50, since the releaser", "compare throughput, p99 and fairness, not p50",
		"contended 8w: fairness across workers (fewest ÷ most acquisitions), share retaken by its releaser: redlock 0.80, 2%; redsync-failfast 0.10, 90%\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	// Only where both ran: stall has no redsync-failfast.
	if strings.Contains(s, "stall: redlock ÷ redsync-failfast") {
		t.Errorf("summary line for stall, where redsync-failfast did not run:\n%s", s)
	}
	// The ratio column compares the same worker count: 2/1 at 8, 6/4 at 1.
	for _, want := range []string{"contended        8  redsync-failfast", "contended        1  redsync-failfast"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks a row starting %q:\n%s", want, s)
		}
	}
	for _, l := range strings.Split(s, "\n") {
		if len(strings.Fields(l)) < 15 { // not a row of the main table
			continue
		}
		if strings.Contains(l, "8  redsync-failfast") && !strings.Contains(l, "2.00×") ||
			strings.Contains(l, "1  redsync-failfast") && !strings.Contains(l, "1.50×") {
			t.Errorf("row with the wrong ratio: %q", l)
		}
	}
	// tabwriter aligns: every row of the main table has the same width.
	lines := strings.Split(s, "\n")
	var widths []int
	for _, l := range lines {
		if strings.Contains(l, "acquisition") || !strings.HasSuffix(l, "-") && !strings.Contains(l, "failures") && !strings.Contains(l, "not_acquired") {
			continue
		}
		widths = append(widths, len([]rune(l)))
	}
	if len(widths) < 2 || slices.Min(widths) != slices.Max(widths) {
		t.Errorf("main table rows have widths %v, want equal (aligned)", widths)
	}
}

// TestSmokeEmbedded runs every scenario and implementation for a moment on
// embedded masters and checks the -json output against the schema and the
// chart file: no speed assertions, only that each cell ran and the faults
// took effect.
func TestSmokeEmbedded(t *testing.T) {
	smoke(t, "-embedded")
}

// TestSmokeLab is the same on real redis-server masters, when installed.
func TestSmokeLab(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	smoke(t)
}

func smoke(t *testing.T, extra ...string) {
	dir := t.TempDir()
	jsonPath, chartPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	// The default scenarios and the opt-in fencing one, which needs no
	// other build or service.
	ran := append(defaultScenarios(), "fencing")
	args := append([]string{"-duration", "1s", "-workers", "2", "-q", "-json", jsonPath,
		"-scenarios", strings.Join(ran, ",")}, extra...)
	if chartsBuilt {
		args = append(args, "-chart", chartPath)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.SchemaVersion != schemaVersion {
		t.Errorf("schema_version = %d, want %d", rep.SchemaVersion, schemaVersion)
	}
	cells := map[string]Result{}
	for _, r := range rep.Results {
		cells[r.Scenario+"/"+r.Impl] = r
	}
	checkMasterStats(t, rep)
	for _, sc := range ran {
		names := implNames()
		if s := scenarioByName(sc); s.impls != nil {
			names = s.impls
		}
		for _, im := range names {
			r, ok := cells[sc+"/"+im]
			if !ok {
				t.Errorf("no result for %s/%s", sc, im)
				continue
			}
			if r.Ops+r.LateOps == 0 {
				t.Errorf("%s/%s completed nothing: %+v", sc, im, r)
			}
			// One shared resource: fairness across workers and the share
			// retaken, both in [0, 1]; neither elsewhere.
			shared := scenarioByName(sc).shared && r.AcquireMs.Count > 0
			for _, f := range []*float64{r.WorkerFairness, r.RetakenShare} {
				if (f != nil) != shared || f != nil && (*f < 0 || *f > 1) {
					t.Errorf("%s/%s: worker fairness %v, retaken %v", sc, im, r.WorkerFairness, r.RetakenShare)
				}
			}
			if !strings.Contains(stdout.String(), im) {
				t.Errorf("table lacks %s", im)
			}
		}
	}
	// The stall must actually stop masters: redsync by default waits for
	// every master, so it completes nothing while two are stopped (the
	// phase is far shorter than go-redis's 3 s ReadTimeout), while ours,
	// which needs only a majority, goes on.
	phaseOps := func(r Result, name string) int64 {
		for _, p := range r.Phases {
			if p.Name == name {
				return p.Ops
			}
		}
		t.Fatalf("%s/%s has no phase %q", r.Scenario, r.Impl, name)
		return 0
	}
	if n := phaseOps(cells["stall/redsync"], "2 stopped"); n != 0 {
		t.Errorf("redsync completed %d ops with two masters stopped; the stall did not take effect", n)
	}
	if n := phaseOps(cells["stall/redlock"], "2 stopped"); n == 0 {
		t.Error("ours completed nothing with two of five masters stopped")
	}
	if !chartsBuilt {
		return
	}
	svg, err := os.ReadFile(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) || bytes.Contains(svg, []byte("http://cdn")) || bytes.Contains(svg, []byte("<script")) {
		t.Errorf("chart is not a self-contained SVG (%d bytes)", len(svg))
	}
	for _, im := range implNames() {
		if !bytes.Contains(svg, []byte(im)) {
			t.Errorf("chart has no legend entry for %s", im)
		}
	}
}

// TestSmokeOtherClients: every implementation on another Go client runs
// and completes Lock+Unlock calls, and none fails with an error other than
// a timeout or a refusal (on a loaded machine a server may time a request
// out: etcd's members commit through a WAL).
func TestSmokeOtherClients(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	names := optInImplNames()
	path := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-duration", "1s", "-workers", "2", "-q", "-scenarios", "uncontended", "-impls", strings.Join(names, ","), "-json", path}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	for _, im := range names {
		if !strings.Contains(stdout.String(), " "+im+" ") {
			t.Errorf("no row for %s:\n%s", im, stdout.String())
		}
		r, ok := findResult(rep.Results, "uncontended", 2, im)
		if !ok || r.Ops == 0 || r.Failures["error"] > 0 {
			t.Errorf("%s: found %v, %d ops, failures %v; want ops and no error:\n%s", im, ok, r.Ops, r.Failures, stdout.String())
		}
	}
}

// TestSmokeEmbeddedSweep runs two worker counts for a moment on embedded
// masters: every cell runs once per count, each result and ratio carries
// its count, ratios pair cells of the same count, and the summary line and
// chart follow.
func TestSmokeEmbeddedSweep(t *testing.T) {
	dir := t.TempDir()
	jsonPath, chartPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	args := []string{"-embedded", "-duration", "100ms", "-workers", "1,3", "-scenarios", "uncontended,contended", "-q",
		"-json", jsonPath}
	if chartsBuilt {
		args = append(args, "-chart", chartPath)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if !slices.Equal(rep.Config.Workers, []int{1, 3}) {
		t.Errorf("config.workers = %v, want [1 3]", rep.Config.Workers)
	}
	type key struct {
		sc, impl string
		workers  int
	}
	cells := map[key]Result{}
	for _, r := range rep.Results {
		cells[key{r.Scenario, r.Impl, r.Workers}] = r
	}
	if want := 2 * 2 * len(implNames()); len(rep.Results) != want || len(cells) != want {
		t.Errorf("%d results (%d distinct), want %d", len(rep.Results), len(cells), want)
	}
	for _, sc := range []string{"uncontended", "contended"} {
		for _, w := range []int{1, 3} {
			for _, im := range implNames() {
				r, ok := cells[key{sc, im, w}]
				switch {
				case !ok:
					t.Errorf("no result for %s/%s/%dw", sc, im, w)
				case sc == "uncontended" && r.Ops+r.LateOps == 0:
					t.Errorf("%s/%s/%dw completed nothing", sc, im, w)
				}
				if im == oursName {
					continue
				}
				x, ok := findRatio(rep.Ratios, sc, w, oursName, "all", im, "all")
				if !ok {
					t.Errorf("no ratio %s %dw redlock ÷ %s", sc, w, im)
					continue
				}
				if x.Numerator.OpsPerSec != cells[key{sc, oursName, w}].OpsPerSec || x.Denominator.OpsPerSec != r.OpsPerSec {
					t.Errorf("ratio %+v does not pair the %d-worker cells", x, w)
				}
			}
		}
	}
	out := stdout.String()
	for _, want := range []string{"workers 1,3 ·", "uncontended: redlock ÷ redsync-failfast  1w ", "  3w ",
		"contended: redlock ÷ redsync-failfast  1w "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !chartsBuilt {
		return
	}
	svg, err := os.ReadFile(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("uncontended, 3 workers")) || bytes.Contains(svg, []byte("1 workers")) {
		t.Errorf("chart should draw the 3-worker cells only (%d bytes)", len(svg))
	}
}

// -repeat runs each group's cells again, every other time in reverse,
// and keeps each implementation's run of median ops/s with all runs' ops/s.
func TestRepeat(t *testing.T) {
	cfg, err := parseFlags([]string{"-embedded", "-scenarios", "uncontended", "-impls", "redlock,single", "-workers", "1,2", "-repeat", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range plan(cfg) {
		got = append(got, fmt.Sprintf("%s/%d/%d", c.impl.name, c.workers, c.run))
	}
	want := []string{"redlock/1/0", "single/1/0", "single/1/1", "redlock/1/1", "redlock/1/2", "single/1/2",
		"redlock/2/0", "single/2/0", "single/2/1", "redlock/2/1", "redlock/2/2", "single/2/2"}
	if !slices.Equal(got, want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
	rs := []Result{
		{Scenario: "s", Impl: "a", Workers: 1, OpsPerSec: 30, Ops: 3},
		{Scenario: "s", Impl: "b", Workers: 1, OpsPerSec: 5},
		{Scenario: "s", Impl: "b", Workers: 1, OpsPerSec: 7},
		{Scenario: "s", Impl: "a", Workers: 1, OpsPerSec: 10, Ops: 1},
		{Scenario: "s", Impl: "a", Workers: 1, OpsPerSec: 20, Ops: 2},
		{Scenario: "s", Impl: "b", Workers: 1, OpsPerSec: 6},
	}
	m := medianRuns(rs)
	if len(m) != 2 || m[0].Impl != "a" || m[0].Ops != 2 || m[0].Repeats != 3 || !slices.Equal(m[0].OpsPerSecRuns, []float64{30, 10, 20}) ||
		m[1].OpsPerSec != 6 || !slices.Equal(m[1].OpsPerSecRuns, []float64{5, 7, 6}) {
		t.Fatalf("medianRuns = %+v", m)
	}
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "r.json")
	if err := run(t.Context(), []string{"-embedded", "-scenarios", "uncontended", "-impls", "redlock,single", "-workers", "1",
		"-duration", "100ms", "-repeat", "2", "-q", "-json", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rep := checkJSON(t, b); rep.Config.Repeat != 2 || len(rep.Results) != 2 || rep.Results[0].Repeats != 2 || len(rep.Results[0].OpsPerSecRuns) != 2 {
		t.Fatalf("JSON of a -repeat 2 run: config %+v, results %+v", rep.Config, rep.Results)
	}
	if !strings.Contains(out.String(), "-repeat 2: every row is the run of median ops/s of 2 interleaved runs") {
		t.Fatalf("table lacks the -repeat note:\n%s", out.String())
	}
}

// -docker excludes the other masters, partition needs -docker, and "all"
// without -docker leaves partition out.
func TestParseDockerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-docker", "-embedded"},
		{"-docker", "-addrs", "127.0.0.1:1"},
		{"-docker", "-cluster", "3x1"},
		{"-scenarios", "partition"},
	} {
		var ue *usageError
		if _, err := parseFlags(args, io.Discard); !errors.As(err, &ue) {
			t.Errorf("parseFlags(%q) = %v, want a usage error", args, err)
		}
	}
	cfg, err := parseFlags([]string{"-scenarios", "all"}, io.Discard)
	if err != nil || slices.Contains(cfg.scenarios, "partition") {
		t.Errorf("-scenarios all without -docker: %v, %v; want no partition", cfg, err)
	}
	if !dockerBuilt {
		return
	}
	cfg, err = parseFlags([]string{"-docker", "-scenarios", "all"}, io.Discard)
	if err != nil || !slices.Contains(cfg.scenarios, "partition") || !cfg.docker {
		t.Errorf("-docker -scenarios all: %+v, %v; want partition", cfg, err)
	}
}

// The other clients and locks, when built, are the ones peerNames lists,
// in its order, and -impls takes them only when named.
func TestPeerNames(t *testing.T) {
	if !peersBuilt {
		t.Skip("built without -tags peers")
	}
	var names []string
	for _, s := range peerImpls {
		names = append(names, s.name)
	}
	if !slices.Equal(names, peerNames) {
		t.Errorf("peerImpls are %q, peerNames %q", names, peerNames)
	}
	c, err := parseFlags([]string{"-impls", "redislock,redlock,rueidislock"}, io.Discard)
	if err != nil || !slices.Equal(c.impls, []string{"redlock", "rueidislock", "redislock"}) {
		t.Errorf("-impls redislock,redlock,rueidislock: %v, %v", c, err)
	}
}

// Without its build tag, each optional part's flag is a usage error that
// names the tag, and -scenarios all leaves out what it cannot run.
func TestExtrasNeedTheirTag(t *testing.T) {
	for _, c := range []struct {
		built bool
		tag   string
		args  []string
	}{
		{chartsBuilt, "charts", []string{"-chart", "x.svg"}},
		{dockerBuilt, "docker", []string{"-docker"}},
		{otelBuilt, "otel", []string{"-metrics-addr", "127.0.0.1:0"}},
		{otelBuilt, "otel", []string{"-scenarios", "telemetry"}},
		{peersBuilt, "peers", []string{"-impls", "redlock,rueidislock"}},
		{etcdBuilt, "etcd", []string{"-impls", "redlock,etcd"}},
		{sqlfenceBuilt, "sqlfence", []string{"-scenarios", "sqlfence"}},
	} {
		if c.built {
			continue
		}
		var ue *usageError
		_, err := parseFlags(c.args, io.Discard)
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-tags "+c.tag) {
			t.Errorf("parseFlags(%q) = %v, want a usage error naming -tags %s", c.args, err, c.tag)
		}
	}
	cfg, err := parseFlags([]string{"-scenarios", "all"}, io.Discard)
	if err != nil || slices.Contains(cfg.scenarios, "telemetry") != otelBuilt {
		t.Errorf("-scenarios all: %v, %v; want telemetry exactly when the otel tag is built", cfg, err)
	}
}

// -lockers N opens each implementation N times per cell, runs the workers
// on each, and reports fairness for the contended cells; bad counts are
// usage errors.
func TestLockers(t *testing.T) {
	for _, bad := range []string{"0", "-1", "1025"} {
		var ue *usageError
		if _, err := parseFlags([]string{"-lockers", bad}, io.Discard); !errors.As(err, &ue) {
			t.Errorf("-lockers %s: %v, want a usage error", bad, err)
		}
	}
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "r.json")
	if err := run(t.Context(), []string{"-embedded", "-scenarios", "uncontended,contended", "-impls", "redlock,redsync-failfast", "-workers", "2",
		"-lockers", "3", "-duration", "300ms", "-q", "-json", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.Config.Lockers != 3 || len(rep.Results) != 4 {
		t.Fatalf("JSON of a -lockers 3 run: config %+v, %d results", rep.Config, len(rep.Results))
	}
	// A contended cell has a fairness when any of its Lockers acquired:
	// on a loaded machine a 300 ms cell may see none, and then has none
	// (min ÷ max of zeros), and no fairness line.
	served := false
	for _, r := range rep.Results {
		if r.Lockers != 3 || (r.Scenario == "contended" && r.Ops > 0) != (r.Fairness != nil) {
			t.Errorf("%s/%s: lockers %d, %d acquisitions, fairness %v", r.Scenario, r.Impl, r.Lockers, r.Ops, r.Fairness)
		}
		if r.Fairness != nil && (*r.Fairness < 0 || *r.Fairness > 1) {
			t.Errorf("%s/%s: fairness %v outside [0, 1]", r.Scenario, r.Impl, *r.Fairness)
		}
		served = served || r.Scenario == "contended" && r.Impl == "redlock" && r.Ops > 0
	}
	if served != strings.Contains(out.String(), "contended 3L×2w redlock: fairness") {
		t.Fatalf("the table's fairness line for a contended cell with acquisitions %v:\n%s", served, out.String())
	}
}

// TestPrimitiveScenarios: semaphore and rwlock run only when named, each
// primitive's cells run next to the mutex's (interleaved by -repeat), and
// the report gives each primitive ÷ the mutex, in the JSON (schema-checked)
// and in the table.
func TestPrimitiveScenarios(t *testing.T) {
	cfg, err := parseFlags([]string{"-embedded"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(cfg.scenarios, "semaphore") || slices.Contains(cfg.scenarios, "rwlock") {
		t.Fatalf("default scenarios %v include an opt-in primitive scenario", cfg.scenarios)
	}
	cfg, err = parseFlags([]string{"-embedded", "-scenarios", "semaphore,rwlock", "-workers", "8", "-repeat", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range plan(cfg) {
		got = append(got, fmt.Sprintf("%s/%s/%d", c.sc.name, c.impl.name, c.run))
	}
	want := []string{"semaphore/redlock/0", "semaphore/redlock-sem1/0", "semaphore/redlock-sem3/0", "semaphore/redlock-sem8/0",
		"semaphore/redlock-sem8/1", "semaphore/redlock-sem3/1", "semaphore/redlock-sem1/1", "semaphore/redlock/1",
		"rwlock/redlock/0", "rwlock/redlock-rw90/0", "rwlock/redlock-rw90/1", "rwlock/redlock/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}

	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "r.json")
	if err := run(t.Context(), []string{"-embedded", "-scenarios", "semaphore,rwlock", "-workers", "2",
		"-duration", "200ms", "-q", "-json", path}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	for _, side := range [][2]string{{"semaphore", "redlock-sem1"}, {"semaphore", "redlock-sem3"}, {"semaphore", "redlock-sem8"}, {"rwlock", "redlock-rw90"}} {
		r, ok := findResult(rep.Results, side[0], 2, side[1])
		if !ok || r.Ops == 0 {
			t.Fatalf("%s %s: result %+v (found %v), want completed operations", side[0], side[1], r, ok)
		}
		if _, ok := findRatio(rep.Ratios, side[0], 2, side[1], "all", oursName, "all"); !ok {
			t.Fatalf("%s: no ratio %s ÷ %s in %+v", side[0], side[1], oursName, rep.Ratios)
		}
	}
	for _, line := range []string{"semaphore 2w: ÷ redlock (mutex)  redlock-sem1 ", "rwlock 2w: ÷ redlock (mutex)  redlock-rw90 "} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("table lacks %q:\n%s", line, out.String())
		}
	}
}
