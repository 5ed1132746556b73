package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os/exec"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/quorumlab/redlock/lab"
)

// A reply of redis-server 7.0 to INFO commandstats, subcommands included.
const commandstatsReply = "# Commandstats\r\n" +
	"cmdstat_set:calls=120,usec=300,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=4,usec=8,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=40,usec=900,usec_per_call=22.50,rejected_calls=1,failed_calls=2\r\n" +
	"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseCommandstats(t *testing.T) {
	got, err := parseCommandstats(commandstatsReply)
	if err != nil {
		t.Fatal(err)
	}
	want := commandCounts{"set": 120, "client|setinfo": 4, "evalsha": 40, "info": 3}
	if !maps.Equal(got, want) {
		t.Errorf("parseCommandstats = %v, want %v", got, want)
	}
	if got, err := parseCommandstats("# Commandstats\r\n"); err != nil || len(got) != 0 {
		t.Errorf("empty section = %v, %v; want no counts, no error", got, err)
	}
	for _, bad := range []string{
		"# Commandstats\r\nused_memory:12\r\n",
		"cmdstat_set:usec=3\r\n",
		"cmdstat_set:calls=x,usec=3\r\n",
		"cmdstat_set:calls=-1\r\n",
		"cmdstat_:calls=1\r\n",
		"cmdstat_set\r\n",
	} {
		if got, err := parseCommandstats(bad); err == nil {
			t.Errorf("parseCommandstats(%q) = %v, want an error", bad, got)
		}
	}
}

func TestDiffCommandstats(t *testing.T) {
	before := []commandCounts{{"set": 10, "info": 2}, {"hello": 1}}
	after := []commandCounts{
		{"set": 25, "info": 3, "evalsha": 5, "get": 5},
		// Master 1's INFO shows only after its first reading; CLIENT PAUSE
		// is the bench's (-addrs stall).
		{"hello": 2, "info": 1, "set": 4, "client|pause": 2},
	}
	w, err := diffCommandstats(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"set": 19, "evalsha": 5, "get": 5, "hello": 1}
	if !maps.Equal(w.byName, want) || w.total != 30 {
		t.Errorf("diff = %d %v, want 30 %v", w.total, w.byName, want)
	}
	// An idle master: the bench's INFO only.
	if w, err := diffCommandstats([]commandCounts{{"info": 7}}, []commandCounts{{"info": 8}}); err != nil || w.total != 0 || len(w.byName) != 0 {
		t.Errorf("idle master: %+v, %v; want nothing", w, err)
	}
	// The bench's INFO is missing: the section is not really reported.
	if _, err := diffCommandstats([]commandCounts{{}}, []commandCounts{{}}); !errors.Is(err, errNoCommandstats) {
		t.Errorf("empty readings: %v, want errNoCommandstats", err)
	}
	// Counters reset in the middle: an error, not a negative count.
	for name, a := range map[string]commandCounts{
		"lower": {"info": 5, "set": 3},
		"gone":  {"info": 5},
	} {
		if _, err := diffCommandstats([]commandCounts{{"info": 1, "set": 9}}, []commandCounts{a}); err == nil || errors.Is(err, errNoCommandstats) ||
			!strings.Contains(err.Error(), "reset") {
			t.Errorf("%s: %v, want a reset error", name, err)
		}
	}
	if _, err := diffCommandstats([]commandCounts{{}}, nil); err == nil {
		t.Error("readings of different lengths: no error")
	}
}

func TestSetMasterStats(t *testing.T) {
	var r Result
	r.AcquireMs.Count = 4
	r.setMasterStats([]float64{0.9, 0.2, 0.5, 0.4, 0.3}, &commandWindow{total: 30, byName: map[string]int64{"set": 30}})
	if r.PingRTTMs == nil || *r.PingRTTMs != 0.4 || len(r.PingRTTPerMasterMs) != 5 || r.PingRTTPerMasterMs[0] != 0.9 {
		t.Errorf("PING RTT %v %v, want median 0.4 and the masters in order", r.PingRTTMs, r.PingRTTPerMasterMs)
	}
	if r.Commands == nil || *r.Commands != 30 || r.CommandsPerAcquisition == nil || *r.CommandsPerAcquisition != 7.5 || r.CommandsByName["set"] != 30 {
		t.Errorf("commands %v %v %v, want 30, 7.5 per acquisition", r.Commands, r.CommandsPerAcquisition, r.CommandsByName)
	}
	var none Result
	none.setMasterStats(nil, &commandWindow{total: 3, byName: map[string]int64{"set": 3}})
	if none.PingRTTMs != nil || none.PingRTTPerMasterMs != nil || none.Commands == nil || none.CommandsPerAcquisition != nil {
		t.Errorf("no RTT, no acquisition: %+v", none)
	}
	var embedded Result
	embedded.setMasterStats(nil, nil)
	b, err := json.Marshal(embedded)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"commands":null`, `"commands_by_name":null`, `"commands_per_acquisition":null`, `"ping_rtt_ms":null`, `"ping_rtt_per_master_ms":null`} {
		if !bytes.Contains(b, []byte(f)) {
			t.Errorf("JSON lacks %s: %s", f, b)
		}
	}
}

// TestMasterStatsLab counts on real redis-server masters: an idle window
// is empty (the bench's own INFO is left out), and a window shows exactly
// what another client sent, commands run by a script included.
func TestMasterStatsLab(t *testing.T) {
	ctx := t.Context()
	cl, admin := labClients(t, 2)
	other := newClients(plainOptions(cl.Addrs()))
	defer closeClients(other)
	for _, c := range other { // dialled (HELLO, CLIENT SETINFO) before the window
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	window := func(do func()) commandWindow {
		t.Helper()
		before, err := readCommandstats(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		do()
		after, err := readCommandstats(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		w, err := diffCommandstats(before, after)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := window(func() {}); w.total != 0 || len(w.byName) != 0 {
		t.Errorf("idle window counted %d: %v", w.total, w.byName)
	}
	w := window(func() {
		for range 5 {
			if err := other[0].Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := other[1].Eval(ctx, `redis.call("SET", KEYS[1], "1"); return redis.call("GET", KEYS[1])`, []string{"k"}).Err(); err != nil {
			t.Fatal(err)
		}
	})
	want := map[string]int64{"set": 6, "eval": 1, "get": 1}
	if !maps.Equal(w.byName, want) || w.total != 8 {
		t.Errorf("window counted %d %v, want 8 %v", w.total, w.byName, want)
	}

	rtt := make(pingSamples, 2)
	if err := rtt.measure(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if len(rtt[0]) != pingRounds || len(rtt[1]) != pingRounds {
		t.Errorf("%d and %d PING samples, want %d each", len(rtt[0]), len(rtt[1]), pingRounds)
	}
	// The measurement's PINGs are outside a cell's window, but they are
	// counted like any command: exactly pingWarmUp+pingRounds.
	one := rtt[:1]
	w = window(func() {
		if err := one.measure(ctx, admin[:1]); err != nil {
			t.Fatal(err)
		}
	})
	if w.byName["ping"] != pingWarmUp+pingRounds || w.total != pingWarmUp+pingRounds {
		t.Errorf("one master's RTT measurement counted %v, want %d PINGs", w.byName, pingWarmUp+pingRounds)
	}
	if len(rtt[0]) != 2*pingRounds || len(rtt[1]) != pingRounds {
		t.Errorf("%d and %d PING samples after measuring master 0 again, want %d and %d", len(rtt[0]), len(rtt[1]), 2*pingRounds, pingRounds)
	}
	if m := rtt.medians(); len(m) != 2 || m[0] <= 0 || m[1] <= 0 {
		t.Errorf("PING RTT medians %v, want two positive", m)
	}

	// A master that cannot be reached: an error naming it, not "not
	// supported" (the cell notes it).
	down := []*redis.Client{admin[0], redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})}
	defer down[1].Close()
	if _, err := readCommandstats(ctx, down); err == nil || errors.Is(err, errNoCommandstats) || !strings.Contains(err.Error(), "master 1") {
		t.Errorf("reading an unreachable master: %v, want an error naming master 1", err)
	}
	p := make(pingSamples, 2)
	if err := p.measure(ctx, down); err == nil || !strings.Contains(err.Error(), "master 1") || len(p[0]) != pingRounds || len(p[1]) != 0 || p.medians() != nil {
		t.Errorf("PING on an unreachable master: %v, samples %d and %d, medians %v; want an error naming master 1 and no medians",
			err, len(p[0]), len(p[1]), p.medians())
	}
}

// TestMasterStatsMiniredis: miniredis does not report INFO commandstats,
// which is errNoCommandstats (the cell reports null, no note); PING works.
func TestMasterStatsMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	admin := []*redis.Client{redis.NewClient(&redis.Options{Addr: m.Addr()})}
	defer closeClients(admin)
	if got, err := readCommandstats(t.Context(), admin); !errors.Is(err, errNoCommandstats) {
		t.Errorf("readCommandstats on miniredis = %v, %v; want errNoCommandstats", got, err)
	}
	rtt := make(pingSamples, 1)
	if err := rtt.measure(t.Context(), admin); err != nil || len(rtt.medians()) != 1 || rtt.medians()[0] <= 0 {
		t.Errorf("PING RTT on miniredis = %v, %v", rtt.medians(), err)
	}
	// A master without samples: no medians at all.
	if m := append(rtt, nil).medians(); m != nil {
		t.Errorf("medians with a master unmeasured = %v, want nil", m)
	}
}

// TestSchemaMasterStats: the fields added within schema version 2 round
// trip, may be null, may be absent (files written before them), and are
// checked.
func TestSchemaMasterStats(t *testing.T) {
	b, err := json.Marshal(syntheticReport())
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	r0, r1 := rep.Results[0], rep.Results[1]
	if r0.Commands == nil || *r0.Commands != 36 || r0.CommandsByName["evalsha"] != 6 || r0.CommandsPerAcquisition == nil ||
		*r0.CommandsPerAcquisition != 12 || r0.PingRTTMs == nil || *r0.PingRTTMs != 0.5 || len(r0.PingRTTPerMasterMs) != 5 {
		t.Errorf("round trip of counted commands and RTT: %+v", r0)
	}
	if r1.Commands != nil || r1.CommandsByName != nil || r1.CommandsPerAcquisition != nil || r1.PingRTTMs != nil || r1.PingRTTPerMasterMs != nil {
		t.Errorf("null fields came back as %+v", r1)
	}
	if r2 := rep.Results[2]; r2.Commands == nil || *r2.Commands != 7 || r2.CommandsPerAcquisition != nil {
		t.Errorf("commands without an acquisition: %+v", r2)
	}

	s := compileSchema(t)
	fields := []string{"commands", "commands_by_name", "commands_per_acquisition", "ping_rtt_ms", "ping_rtt_per_master_ms", "ping_rtt_loaded_ms"}
	check := func(name string, ok bool, mutate func(r map[string]any)) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, r := range m["results"].([]any) {
			mutate(r.(map[string]any))
		}
		mb, _ := json.Marshal(m)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(mb))
		if err := s.Validate(inst); (err == nil) != ok {
			t.Errorf("%s: schema says %v, want valid=%v", name, err, ok)
		}
	}
	check("absent (a version-2 file written before them)", true, func(r map[string]any) {
		for _, f := range fields {
			delete(r, f)
		}
	})
	check("all null", true, func(r map[string]any) {
		for _, f := range fields {
			r[f] = nil
		}
	})
	check("negative commands", false, func(r map[string]any) { r["commands"] = -1 })
	check("fractional commands", false, func(r map[string]any) { r["commands"] = 1.5 })
	check("zero count by name", false, func(r map[string]any) { r["commands_by_name"] = map[string]any{"set": 0} })
	check("per acquisition as text", false, func(r map[string]any) { r["commands_per_acquisition"] = "12" })
	check("negative RTT", false, func(r map[string]any) { r["ping_rtt_ms"] = -0.1 })
	check("negative loaded RTT", false, func(r map[string]any) { r["ping_rtt_loaded_ms"] = -1 })
	check("RTT per master not numbers", false, func(r map[string]any) { r["ping_rtt_per_master_ms"] = []any{"x"} })
}

func TestRenderTableMasterStats(t *testing.T) {
	var out bytes.Buffer
	if err := renderTable(&out, syntheticReport()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"  cmd/acq  redlock ÷  ",
		"\ncontended 8w: handoff p50 ÷ PING RTT: redlock 2.00× (1.00 ÷ 0.500 ms), 0.50× the loaded RTT (2.00 ms), redsync-failfast 4.00× (1.00 ÷ 0.250 ms)\n",
		"\ncontended 8w: commands/acquisition: redlock 12.0, redsync-failfast 3.00; Lock p99 redlock ÷ redsync-failfast 0.75×\n",
		"\ncontended 1w: handoff p50 ÷ PING RTT: redlock n/a, redsync-failfast n/a\n",
		"\ncontended 1w: commands/acquisition: redlock n/a, redsync-failfast n/a; Lock p99 redlock ÷ redsync-failfast 1.00×\n",
		"PING RTT  p50 ÷ RTT  RTT loaded  p50 ÷ loaded\n",
		"\ncontended 8w redlock: 12.0 = set 6.00 + del 2.00 + evalsha 2.00 + get 2.00 (36 commands, 3 acquisitions)\n",
		"\ncontended 8w redsync-failfast: 3.00 = set 2.00 + evalsha 1.00 (15 commands, 5 acquisitions)\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	// The cmd/acq column: 12.0 and 3.00 where counted, "-" elsewhere
	// (stall/redsync counted 7 commands but no Lock succeeded).
	rows := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) >= 15 && (f[0] == "contended" || f[0] == "stall") {
			rows[f[0]+"/"+f[1]+"/"+f[2]] = l
		}
	}
	for key, want := range map[string]string{
		"contended/8/redlock": "  12.0  ", "contended/8/redsync-failfast": "  3.00  ", "stall/8/redsync": "  -  ∞ (0 ops)",
	} {
		if !strings.Contains(rows[key], want) {
			t.Errorf("row %s = %q, want it to contain %q", key, rows[key], want)
		}
	}
	// The handoff table: RTT and ratio where measured, n/a elsewhere.
	for _, want := range []string{"3.00  0.500 ms      2.00×     2.00 ms         0.50×\n", "3.00  0.250 ms      4.00×         n/a           n/a\n", "3.00       n/a        n/a         n/a           n/a\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("handoff table lacks %q:\n%s", want, s)
		}
	}
}

// checkMasterStats checks the masters' side of every cell of a smoke run:
// the PING round trip is measured everywhere; commands and command time
// are null on embedded masters (CPU is measured: theirs and the
// clients'), and on real ones counted, with at least a majority's
// SETs per successful Lock for the quorum implementations (every
// acquisition took SET NX on at least 3 of the 5 masters).
func checkMasterStats(t *testing.T, rep *Report) {
	t.Helper()
	quorum := map[string]bool{"redlock": true, "redsync": true, "redsync-failfast": true}
	for _, r := range rep.Results {
		cell := r.Scenario + "/" + r.Impl
		if r.PingRTTMs == nil || *r.PingRTTMs <= 0 || len(r.PingRTTPerMasterMs) != rep.Masters.N {
			t.Errorf("%s: PING RTT %v per master %v, want one positive median per master", cell, r.PingRTTMs, r.PingRTTPerMasterMs)
		}
		if rep.Masters.Kind == "embedded" {
			if r.Commands != nil || r.CommandsByName != nil || r.CommandsPerAcquisition != nil {
				t.Errorf("%s: embedded masters counted commands: %v %v", cell, r.Commands, r.CommandsByName)
			}
			// Their process's CPU and the clients', measured apart; no
			// command time (miniredis keeps no commandstats).
			c, s := r.ClientCPUUsPerAcquisition, r.ServerCPUUsPerAcquisition
			if r.AcquireMs.Count > 0 && (c == nil || s == nil || *c <= 0 || *s <= 0) {
				t.Errorf("%s: CPU per acquisition client %v server %v, want both measured (notes %q)", cell, c, s, r.Notes)
			}
			if r.ServerCommandUsPerAcquisition != nil {
				t.Errorf("%s: embedded masters reported command time", cell)
			}
			continue
		}
		if r.AcquireMs.Count > 0 {
			c, s, f := r.ClientCPUUsPerAcquisition, r.ServerCPUUsPerAcquisition, r.ServerCommandUsPerAcquisition
			if c == nil || s == nil || f == nil || *c <= 0 || *s <= 0 || *f <= 0 {
				t.Errorf("%s: CPU per acquisition client %v server %v floor %v, want all measured (notes %q)", cell, c, s, f, r.Notes)
			}
		}
		if r.Commands == nil || r.CommandsPerAcquisition == nil {
			t.Errorf("%s: commands not counted on %s masters (notes %q)", cell, rep.Masters.Kind, r.Notes)
			continue
		}
		var sum int64
		for _, n := range r.CommandsByName {
			sum += n
		}
		if sum != *r.Commands || r.CommandsByName["info"] != 0 {
			t.Errorf("%s: commands %d, by name %v (sum %d; the bench's INFO must not count)", cell, *r.Commands, r.CommandsByName, sum)
		}
		if quorum[r.Impl] && r.CommandsByName["set"] < int64(3*r.AcquireMs.Count) {
			t.Errorf("%s: %d SETs for %d acquisitions, want at least 3 each", cell, r.CommandsByName["set"], r.AcquireMs.Count)
		}
	}
}

// labClients starts n local redis-server masters for t (skipping t when
// redis-server is not installed) and returns them with a go-redis client
// each, closed when t ends.
func labClients(t *testing.T, n int) (*lab.Masters, []*redis.Client) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	cl := lab.ForTest(t, n, nil)
	clients := newClients(plainOptions(cl.Addrs()))
	t.Cleanup(func() { closeClients(clients) })
	return cl, clients
}
