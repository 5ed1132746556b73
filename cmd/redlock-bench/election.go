package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// ---- hand-over ----

// handover runs election-handover: for each repeat, each implementation
// for -duration, interleaved.
func (r electionRun) handover(ctx context.Context) ([]ElectionResult, error) {
	samples := map[string]*electionSamples{}
	for _, n := range r.impls {
		samples[n] = &electionSamples{}
	}
	for k := range max(r.repeat, 1) {
		for _, n := range r.order(k) {
			spec, _ := electionByName(n)
			name := fmt.Sprintf("%s/e/handover/%s/%d", r.runID, n, k)
			fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, %d campaigners, %v (round %d)\n", handoverScenario, n, r.campaigners, r.duration, k+1)
			if err := handoverRun(ctx, spec, r.env, name, r.campaigners, r.duration, samples[n]); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	var out []ElectionResult
	for _, n := range r.impls {
		out = append(out, samples[n].result(handoverScenario, n, r.campaigners, false))
	}
	return out, nil
}

// handoverRun has n campaigners campaign in a loop for d: each, once
// leading, holds for handoverHold, resigns and campaigns again. A sample
// is from a Resign's start to the next Campaign's return (mutual exclusion
// makes that the successor).
func handoverRun(ctx context.Context, spec electionSpec, env electionEnv, name string, n int, d time.Duration, s *electionSamples) error {
	cs, err := openCampaigners(spec, env, name, n)
	if err != nil {
		return fmt.Errorf("opening %d campaigners: %w", n, err)
	}
	s.noteTTL(ctx, cs[0], env.ttl)
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(d))
	defer cancel()
	var (
		lastResign atomic.Int64 // offset from start of the latest Resign's start, +1 (0: none yet)
		wg         sync.WaitGroup
	)
	for i, c := range cs {
		value := fmt.Sprintf("campaigner-%d", i)
		wg.Go(func() {
			stop := context.WithoutCancel(runCtx)
			for runCtx.Err() == nil {
				err := c.campaign(runCtx, value)
				t1 := time.Since(start)
				if err != nil {
					if runCtx.Err() == nil {
						s.fail(failureKind(err), err)
						sleepCtx(runCtx, handoverHold) // an error is not a busy loop
					}
					continue
				}
				if u := lastResign.Load(); u > 0 && runCtx.Err() == nil {
					s.add(t1 - time.Duration(u-1))
				}
				sleepCtx(runCtx, handoverHold)
				lastResign.Store(int64(time.Since(start)) + 1)
				rctx, rcancel := context.WithTimeout(stop, electionCloseBound)
				err = c.resign(rctx)
				rcancel()
				if err != nil {
					s.fail("resign_"+failureKind(err), err)
				}
			}
		})
	}
	wg.Wait()
	return closeCampaigners(cs)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ---- failover ----

// failover runs election-failover: -failovers rounds, each implementation
// once per round, interleaved.
func (r electionRun) failover(ctx context.Context) ([]ElectionResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to re-execute as the leader: %w", err)
	}
	child, err := childMasters(r.env.masters)
	if err != nil {
		return nil, err
	}
	samples := map[string]*electionSamples{}
	for _, n := range r.impls {
		samples[n] = &electionSamples{}
	}
	for k := range r.failovers {
		for _, n := range r.order(k) {
			spec, _ := electionByName(n)
			fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, round %d of %d\n", failoverScenario, n, k+1, r.failovers)
			// A round that fails (e.g. its leader cannot lead) is counted
			// and tried again, on an election of its own, a few times.
			var errs []error
			for try := range failoverTries {
				name := fmt.Sprintf("%s/e/failover/%s/%d.%d", r.runID, n, k, try)
				cs := childSpec{Impl: n, Election: name, Value: "child", TTLMs: r.env.ttl.Milliseconds(), Masters: child, Etcd: r.env.etcd}
				lat, err := failoverRound(ctx, exe, cs, spec, r.env, r.campaigners, samples[n])
				if err == nil {
					samples[n].add(lat)
					errs = nil
					break
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				samples[n].fail("round_failed", err)
				fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, round %d, try %d failed: %v\n", failoverScenario, n, k+1, try+1, err)
				errs = append(errs, err)
			}
			if len(errs) > 0 {
				return nil, fmt.Errorf("%s, round %d: %d tries failed: %w", n, k+1, failoverTries, errors.Join(errs...))
			}
		}
	}
	var out []ElectionResult
	for _, n := range r.impls {
		out = append(out, samples[n].result(failoverScenario, n, r.campaigners, true))
	}
	return out, nil
}

// failoverRound starts the leader as a child process, has n−1 campaigners
// of this process campaign behind it, SIGKILLs the child after a settle
// time (with jitter over a third of the TTL, so the kill falls anywhere in
// the leader's extension or keep-alive cycle), and returns the time from
// the kill to the first of them leading.
func failoverRound(ctx context.Context, exe string, spec childSpec, es electionSpec, env electionEnv, n int, s *electionSamples) (time.Duration, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childCampaignerEnv+"="+string(b))
	cmd.SysProcAttr = childProcAttr()
	var childErr strings.Builder
	cmd.Stderr = &limitedWriter{w: &childErr, n: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting the leader process: %w", err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != childLeadingLine {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			killed = true
			return 0, fmt.Errorf("the leader process did not lead (%q): %s", l, strings.TrimSpace(childErr.String()))
		}
	case <-time.After(campaignBound):
		return 0, fmt.Errorf("the leader process did not lead within %v: %s", campaignBound, strings.TrimSpace(childErr.String()))
	case <-ctx.Done():
		return 0, ctx.Err()
	}

	cs, err := openCampaigners(es, env, spec.Election, n-1)
	if err != nil {
		return 0, fmt.Errorf("opening %d campaigners: %w", n-1, err)
	}
	s.noteTTL(ctx, cs[0], env.ttl)
	cctx, cancel := context.WithCancel(ctx)
	type win struct {
		i  int
		at time.Time
	}
	won := make(chan win, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if err := c.campaign(cctx, fmt.Sprintf("campaigner-%d", i)); err == nil {
				won <- win{i, time.Now()}
			} else if cctx.Err() == nil {
				won <- win{i: -1}
				s.fail(failureKind(err), err)
			}
		})
	}
	settle := failoverSettleFloor + mrand.N(env.ttl/3+1)
	var res time.Duration
	var roundErr error
	select {
	case w := <-won:
		roundErr = fmt.Errorf("campaigner %d led (or failed) before the leader was killed", w.i)
	case <-time.After(settle):
		t0 := time.Now()
		if err := cmd.Process.Kill(); err != nil {
			roundErr = fmt.Errorf("SIGKILL: %w", err)
			break
		}
		killed = true
		select {
		case w := <-won:
			if w.i < 0 {
				roundErr = errors.New("a campaigner failed after the kill (see the failures)")
			}
			res = w.at.Sub(t0)
		case <-time.After(campaignBound + 3*env.ttl):
			roundErr = fmt.Errorf("no campaigner led within %v of the kill", campaignBound+3*env.ttl)
		case <-ctx.Done():
			roundErr = ctx.Err()
		}
	case <-ctx.Done():
		roundErr = ctx.Err()
	}
	_ = cmd.Wait()
	cancel()
	wg.Wait()
	// The winner resigns (the others' Campaign ended with cctx); then
	// every campaigner closes.
	close(won)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), electionCloseBound)
	defer rcancel()
	var errs []error
	for w := range won {
		if w.i >= 0 {
			errs = append(errs, cs[w.i].resign(rctx))
		}
	}
	errs = append(errs, closeCampaigners(cs))
	if roundErr != nil {
		return 0, roundErr
	}
	if err := errors.Join(errs...); err != nil {
		s.notes = append(s.notes, "closing after a failover: "+err.Error())
	}
	return res, nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// ---- the child campaigner ----

// childSpec is what the leader process of a failover round is given, in
// its environment (childCampaignerEnv) as JSON.
type childSpec struct {
	Impl     string        `json:"impl"`
	Election string        `json:"election"`
	Value    string        `json:"value"`
	TTLMs    int64         `json:"ttl_ms"`
	Masters  []childMaster `json:"masters"`
	Etcd     []string      `json:"etcd"`
}

// childMaster is one master's client options, as far as a child needs
// them.
type childMaster struct {
	Addr     string `json:"addr"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
}

// childMasters are the masters' options for a child; TLS masters are not
// supported (the CA would have to be passed along).
func childMasters(ms []*redis.Options) ([]childMaster, error) {
	out := make([]childMaster, len(ms))
	for i, o := range ms {
		if o.TLSConfig != nil {
			return nil, fmt.Errorf("%s needs masters without TLS (its leader is a child process)", failoverScenario)
		}
		out[i] = childMaster{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB}
	}
	return out, nil
}

// childCampaigner reports whether this process is a failover round's
// leader (childCampaignerEnv set), and if so runs it and returns its exit
// code: main and TestMain call it first.
func childCampaigner() (code int, isChild bool) {
	spec, ok := os.LookupEnv(childCampaignerEnv)
	if !ok {
		return 0, false
	}
	return runChildCampaigner(spec, os.Stdin, os.Stdout, os.Stderr), true
}

// runChildCampaigner campaigns as spec says; once leading it prints
// childLeadingLine and waits for stdin to close (or for SIGKILL, which is
// the point), then resigns.
func runChildCampaigner(specJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: %s: %v\n", childCampaignerEnv, err)
		return 2
	}
	es, ok := electionByName(spec.Impl)
	if !ok {
		fmt.Fprintf(stderr, "redlock-bench campaigner: no election %q in this build\n", spec.Impl)
		return 2
	}
	env := electionEnv{etcd: spec.Etcd, ttl: time.Duration(spec.TTLMs) * time.Millisecond}
	for _, m := range spec.Masters {
		env.masters = append(env.masters, &redis.Options{Addr: m.Addr, Username: m.Username, Password: m.Password, DB: m.DB})
	}
	c, err := es.open(env, spec.Election)
	if err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: opening: %v\n", err)
		return 1
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), campaignBound)
	defer cancel()
	if err := c.campaign(ctx, spec.Value); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: campaign: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, childLeadingLine)
	_, _ = io.Copy(io.Discard, stdin)
	rctx, rcancel := context.WithTimeout(context.Background(), electionCloseBound)
	defer rcancel()
	if err := c.resign(rctx); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: resign: %v\n", err)
		return 1
	}
	return 0
}

// ---- report ----

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
