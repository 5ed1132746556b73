package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// The election scenarios (only when named) measure leader election, not
// Lock+Unlock throughput, so they are not cells: each runs its rounds for
// every implementation that has an election (electionSpecs: ours,
// Locker.Election, and, with the etcd tag, etcd's concurrency.Election), interleaved, and reports a
// latency distribution per implementation in a table of its own and in
// the JSON's "elections".
//
//	election-handover  -campaigners campaigners, each with clients of its
//	                   own, campaign in a loop; the leader holds for
//	                   handoverHold, then resigns and campaigns again.
//	                   Measured: from Resign's start to the next
//	                   campaigner's Campaign returning, for -duration.
//	election-failover  a child process (this binary, re-executed) campaigns
//	                   and, once leading, says so; the other campaigners
//	                   campaign in this process; the child is SIGKILLed.
//	                   Measured: from the kill to another campaigner's
//	                   Campaign returning, -failovers rounds. Ours is bounded
//	                   by the TTL (the dead leader's lock expires), etcd's by
//	                   its lease TTL: both run with -election-ttl.

// campaigner is one participant in an election, with clients of its own
// (what one process would have). It is used by one goroutine at a time.
type campaigner interface {
	// campaign returns once this campaigner leads (value published), or
	// with an error, ctx's when it ends first.
	campaign(ctx context.Context, value string) error
	// resign ends this campaigner's leadership: the next one leads.
	resign(ctx context.Context) error
	close() error
}

// ttlReporter is a campaigner that can say what TTL its server granted
// (etcd: the lease's, which the server may raise to its minimum).
type ttlReporter interface {
	grantedTTL(ctx context.Context) (time.Duration, error)
}

// electionEnv is what a campaigner is opened on.
type electionEnv struct {
	masters []*redis.Options // the bench's Redis masters
	etcd    []string         // the etcd cluster's client URLs, when started
	ttl     time.Duration    // -election-ttl
}

// electionSpec is one implementation's election.
type electionSpec struct {
	name string
	desc string
	// open is one campaigner in the election called name.
	open func(env electionEnv, name string) (campaigner, error)
}

// electionSpecs are the implementations with an election, in run order:
// ours (election_ours.go) and etcd's (etcd.go, build tag etcd).
func electionSpecs() []electionSpec {
	return slices.Concat([]electionSpec{oursElection}, etcdElections)
}

func electionByName(name string) (electionSpec, bool) {
	for _, s := range electionSpecs() {
		if s.name == name {
			return s, true
		}
	}
	return electionSpec{}, false
}

// electionNames are the -impls that have an election (whether built or
// not: etcd without its tag is refused by parseFlags).
var electionNames = []string{"redlock", "etcd"}

const (
	handoverScenario = "election-handover"
	failoverScenario = "election-failover"
)

// Election defaults: a short TTL so a failover round is short, three
// campaigners, five failovers per implementation.
const (
	defaultElectionTTL  = 2 * time.Second
	defaultCampaigners  = 3
	defaultFailovers    = 5
	maxCampaigners      = 64
	maxFailovers        = 1000
	handoverHold        = 10 * time.Millisecond // a leader's term in the hand-over loop, before it resigns
	campaignBound       = 30 * time.Second      // a child's first Campaign, and a campaigner's after a kill (+ 3 TTL)
	electionCloseBound  = 10 * time.Second      // resigning and closing at the end of a round
	childCampaignerEnv  = "REDLOCK_BENCH_CAMPAIGNER"
	childLeadingLine    = "leading"
	failoverSettleFloor = 250 * time.Millisecond
	failoverTries       = 3 // per round, before the scenario fails
)

// isElectionScenario: the scenario is measured by runElections, not in
// cells.
func isElectionScenario(name string) bool {
	return name == handoverScenario || name == failoverScenario
}

// ElectionResult is one implementation in one election scenario (the
// JSON's "elections").
type ElectionResult struct {
	Scenario    string `json:"scenario"`
	Impl        string `json:"impl"`
	Campaigners int    `json:"campaigners"`
	// TTLMs is the TTL the leadership ran with: ours' lock TTL; etcd's
	// lease TTL as the server granted it.
	TTLMs int64 `json:"ttl_ms"`
	// LatencyMs: hand-over, from Resign's start to the next campaigner's
	// Campaign returning; failover, from SIGKILL of the leading process to
	// another campaigner's Campaign returning.
	LatencyMs Dist `json:"latency_ms"`
	// SamplesMs are the failover rounds' latencies in run order (null for
	// hand-over).
	SamplesMs []float64        `json:"samples_ms"`
	Failures  map[string]int64 `json:"failures"`
	Notes     []string         `json:"notes"`
}

// electionRun is what runElections needs of the run.
type electionRun struct {
	scenarios   []string
	impls       []string // implementations with an election, in -impls order
	campaigners int
	failovers   int
	repeat      int
	duration    time.Duration
	env         electionEnv
	runID       string
	ms          *masters
	stderr      io.Writer
}

// runElections runs the election scenarios of r.scenarios for r.impls.
func runElections(ctx context.Context, r electionRun) ([]ElectionResult, error) {
	var out []ElectionResult
	for _, sc := range r.scenarios {
		var rows []ElectionResult
		var err error
		switch sc {
		case handoverScenario:
			rows, err = r.handover(ctx)
		case failoverScenario:
			rows, err = r.failover(ctx)
		default:
			continue
		}
		out = append(out, rows...)
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		delErr := r.ms.deleteKeys(cleanCtx, keyPrefix+"*"+r.runID+"/e/*")
		cancel()
		if err != nil {
			return out, fmt.Errorf("%s: %w", sc, err)
		}
		if delErr != nil && len(rows) > 0 {
			rows[0].Notes = append(rows[0].Notes, "deleting the election keys: "+delErr.Error())
		}
	}
	return out, nil
}

// order is the implementations in round k: in -impls order, every other
// round reversed, so that none always goes first.
func (r electionRun) order(k int) []string {
	if k%2 == 0 {
		return r.impls
	}
	out := slices.Clone(r.impls)
	slices.Reverse(out)
	return out
}

// electionSamples is one implementation's samples in one scenario.
type electionSamples struct {
	mu       sync.Mutex // guards lat, failures and example: campaigners record concurrently
	lat      []time.Duration
	failures map[string]int64
	example  map[string]string
	notes    []string
	ttl      time.Duration
}

func (s *electionSamples) fail(kind string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures == nil {
		s.failures, s.example = map[string]int64{}, map[string]string{}
	}
	if s.failures[kind] == 0 {
		s.example[kind] = err.Error()
	}
	s.failures[kind]++
}

func (s *electionSamples) add(d time.Duration) {
	s.mu.Lock()
	s.lat = append(s.lat, d)
	s.mu.Unlock()
}

func (s *electionSamples) result(sc, impl string, campaigners int, samples bool) ElectionResult {
	res := ElectionResult{Scenario: sc, Impl: impl, Campaigners: campaigners, TTLMs: s.ttl.Milliseconds(),
		Failures: map[string]int64{}, Notes: slices.Clone(s.notes)}
	if res.Notes == nil {
		res.Notes = []string{}
	}
	maps.Copy(res.Failures, s.failures)
	for _, k := range slices.Sorted(maps.Keys(s.example)) {
		res.Notes = append(res.Notes, fmt.Sprintf("first %s: %s", k, s.example[k]))
	}
	res.LatencyMs = distOf(durationsMs(s.lat))
	if samples {
		res.SamplesMs = make([]float64, len(s.lat))
		for i, d := range s.lat {
			res.SamplesMs[i] = ms(d)
		}
	}
	return res
}

// openCampaigners opens n campaigners of spec in the election called name;
// on error it closes those it opened.
func openCampaigners(spec electionSpec, env electionEnv, name string, n int) ([]campaigner, error) {
	cs := make([]campaigner, 0, n)
	for range n {
		c, err := spec.open(env, name)
		if err != nil {
			return nil, errors.Join(err, closeCampaigners(cs))
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeCampaigners(cs []campaigner) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// noteTTL records the TTL the implementation ran with: the one its server
// granted where it says (etcd), else the configured one.
func (s *electionSamples) noteTTL(ctx context.Context, c campaigner, want time.Duration) {
	if s.ttl != 0 {
		return
	}
	s.ttl = want
	tr, ok := c.(ttlReporter)
	if !ok {
		return
	}
	got, err := tr.grantedTTL(ctx)
	switch {
	case err != nil:
		s.notes = append(s.notes, "granted lease TTL not read: "+err.Error())
	case got != want:
		s.ttl = got
		s.notes = append(s.notes, fmt.Sprintf("the server granted a lease TTL of %v for the %v asked (its minimum)", got, want))
	}
}

// renderElections writes the election table and the ours ÷ etcd lines.
func renderElections(w io.Writer, rs []ElectionResult) error {
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nelections: latency (ms) from Resign's start (hand-over) or the leader's SIGKILL (failover) to the next campaigner's Campaign returning")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\timpl\tcampaigners\tTTL\tcount\tp50\tp90\tp99\tmax\tfailures\t")
	for _, r := range rs {
		d := r.LatencyMs
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Impl, r.Campaigners, time.Duration(r.TTLMs)*time.Millisecond,
			d.Count, fmtMs(d.P50), fmtMs(d.P90), fmtMs(d.P99), fmtMs(d.Max), fmtFailures(r.Failures))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.SamplesMs != nil {
			parts := make([]string, len(r.SamplesMs))
			for i, x := range r.SamplesMs {
				parts[i] = fmtMs(x)
			}
			fmt.Fprintf(w, "  %s %s rounds (ms, in run order): %s\n", r.Scenario, r.Impl, strings.Join(parts, " "))
		}
	}
	for _, sc := range []string{handoverScenario, failoverScenario} {
		ours, ok1 := findElection(rs, sc, oursName)
		them, ok2 := findElection(rs, sc, "etcd")
		if !ok1 || !ok2 || ours.LatencyMs.Count == 0 || them.LatencyMs.Count == 0 {
			continue
		}
		hi, hiName := ours.LatencyMs.P99, "p99"
		if sc == failoverScenario {
			hi, hiName = ours.LatencyMs.Max, "max"
		}
		themHi := them.LatencyMs.P99
		if sc == failoverScenario {
			themHi = them.LatencyMs.Max
		}
		fmt.Fprintf(w, "%s: %s ÷ etcd  p50 %s (%s ÷ %s ms)  %s %s (%s ÷ %s ms)\n", sc, oursName,
			fmtRatioOf(ratio(ours.LatencyMs.P50, them.LatencyMs.P50)), fmtMs(ours.LatencyMs.P50), fmtMs(them.LatencyMs.P50),
			hiName, fmtRatioOf(ratio(hi, themHi)), fmtMs(hi), fmtMs(themHi))
	}
	fmt.Fprintf(w, "(hand-over: the leader holds %v, then resigns and campaigns again; failover: the leader is a child process SIGKILLed after a\n", handoverHold)
	fmt.Fprintln(w, " settle time jittered over a third of the TTL; ours is bounded by the TTL, as the dead leader's lock must expire, etcd's by its")
	fmt.Fprintln(w, " session's lease TTL, as the dead leader's lease must expire; both ran with the TTL shown)")
	for _, r := range rs {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s/%s: %s\n", r.Scenario, r.Impl, n)
		}
	}
	return nil
}

func findElection(rs []ElectionResult, sc, impl string) (ElectionResult, bool) {
	for _, r := range rs {
		if r.Scenario == sc && r.Impl == impl {
			return r, true
		}
	}
	return ElectionResult{}, false
}
