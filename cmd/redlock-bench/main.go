// Command redlock-bench compares this module's redlock with
// go-redsync/redsync (default and fail-fast) and a single-master lock, on
// the same masters, in one run: throughput, acquire latency, failures by
// kind, validity left at acquisition, and ratios, healthy and with masters
// stopped. Run it with -h for the flags and what each scenario does.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/quorumlab/redlock/internal/version"
)

func main() {
	if code, ok := childCampaigner(); ok { // a failover round's leader (election.go)
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode says err on stderr and returns the exit code: 0 for none and
// for -h, 2 for a usage error (a short message and a hint, not the
// usage), 1 for any other error.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "redlock-bench:", err)
		fmt.Fprintln(stderr, "run redlock-bench -h for the flags")
		return 2
	}
	fmt.Fprintln(stderr, "redlock-bench:", err)
	return 1
}

// run is the whole command; main only maps its error to an exit code
// (usageError: 2, other errors: 1).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	if cfg.version {
		_, err := fmt.Fprintln(stdout, version.String("redlock-bench"))
		return err
	}
	if cfg.printSchema {
		_, err := stdout.Write(schemaJSON)
		return err
	}
	began := time.Now()
	tel, err := newBenchTelemetry(cfg.metricsAddr, stderr)
	if err != nil {
		return err
	}
	defer tel.shutdown()
	// etcd first: without it on PATH the run fails before anything starts.
	var etcd *etcdServers
	if slices.Contains(cfg.impls, etcdImplName) {
		if etcd, err = startEtcd(ctx, stderr); err != nil {
			return err
		}
		defer etcd.close()
	}
	ms, err := openMasters(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer ms.shutdown()

	if i := slices.Index(cfg.scenarios, "leases"); i >= 0 {
		cfg.scenarios = slices.Delete(cfg.scenarios, i, i+1)
		r, err := runLeases(ctx, ms, cfg.leases, cfg.ttl, cfg.duration, stderr)
		if err != nil {
			return fmt.Errorf("leases: %w", err)
		}
		if err := renderLeases(stdout, r, fmt.Sprintf("%d %s masters", ms.info.N, ms.info.Kind)); err != nil {
			return err
		}
		if len(cfg.scenarios) == 0 {
			return nil
		}
	}
	if i := slices.Index(cfg.scenarios, "sqlfence"); i >= 0 { // sqlfence.go
		cfg.scenarios = slices.Delete(cfg.scenarios, i, i+1)
		r, err := runSQLFence(ctx, ms, cfg, stderr)
		if err != nil {
			return fmt.Errorf("sqlfence: %w", err)
		}
		if err := renderSQLFence(stdout, r); err != nil {
			return err
		}
		if len(cfg.scenarios) == 0 {
			return nil
		}
	}
	rep := newReport(cfg, ms, began)
	rep.Etcd = etcd.info()
	cells := plan(cfg)
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	prog := newProgress(stderr, cfg.quiet, len(cells))
	runID := newRunID()
	var runErr error
	for i, c := range cells {
		res, err := runCell(ctx, c, cellEnv{ms: ms, duration: cfg.duration, ttl: cfg.ttl,
			lockers: cfg.lockers, run: runID, index: i, progress: prog, tel: tel, etcd: etcd})
		if err != nil {
			runErr = err
			if ctx.Err() != nil {
				// Interrupted: report the cells that finished.
				runErr = fmt.Errorf("interrupted after %d of %d cells: %w", i, len(cells), err)
			}
			break
		}
		rep.Results = append(rep.Results, res)
	}
	if cfg.repeat > 1 {
		rep.Results = medianRuns(rep.Results)
	}
	if runErr == nil && slices.ContainsFunc(cfg.scenarios, isElectionScenario) {
		er := electionRun{scenarios: cfg.scenarios, impls: cfg.electionImpls(), campaigners: cfg.campaigners,
			failovers: cfg.failovers, repeat: cfg.repeat, duration: cfg.duration, runID: runID, ms: ms, stderr: stderr,
			env: electionEnv{masters: ms.opts, ttl: cfg.electionTTL}}
		if etcd != nil {
			er.env.etcd = etcd.endpoints
		}
		rep.Elections, runErr = runElections(ctx, er)
		if runErr != nil && ctx.Err() != nil {
			runErr = fmt.Errorf("interrupted in the election scenarios: %w", runErr)
		}
	}
	rep.Ratios = computeRatios(rep.Results)
	rep.WallSeconds = time.Since(began).Seconds()

	errs := []error{runErr, renderTable(stdout, rep)}
	if cfg.jsonPath != "" {
		errs = append(errs, writeJSON(cfg.jsonPath, rep))
	}
	if cfg.chartPath != "" && len(rep.Results) > 0 {
		errs = append(errs, writeChart(cfg.chartPath, rep))
	}
	return errors.Join(errs...)
}

// medianRuns keeps, of the repeated runs of each scenario × impl ×
// workers, the run of median ops/s (the lower of the two middle ones for
// an even count), with every run's ops/s, in first-run order.
func medianRuns(rs []Result) []Result {
	type key struct {
		sc, impl string
		w        int
	}
	var order []key
	runs := map[key][]Result{}
	for _, r := range rs {
		k := key{r.Scenario, r.Impl, r.Workers}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		all := runs[k]
		ops := make([]float64, len(all))
		for i, r := range all {
			ops[i] = r.OpsPerSec
		}
		sorted := slices.Clone(all)
		slices.SortStableFunc(sorted, func(a, b Result) int { return cmp.Compare(a.OpsPerSec, b.OpsPerSec) })
		m := sorted[(len(sorted)-1)/2]
		m.Repeats, m.OpsPerSecRuns = len(all), ops
		out = append(out, m)
	}
	return out
}

func newReport(cfg *config, ms *masters, began time.Time) *Report {
	rep := &Report{
		SchemaVersion: schemaVersion,
		Tool:          "redlock-bench",
		StartedAt:     began.UTC().Truncate(time.Millisecond),
		Env:           Env{GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU()},
		Masters:       ms.info,
		Config: Config{Workers: cfg.workers, DurationSeconds: cfg.duration.Seconds(), TTLMs: cfg.ttl.Milliseconds(),
			Scenarios: cfg.scenarios, Impls: cfg.impls},
		Results: []Result{},
	}
	if cfg.repeat > 1 {
		rep.Config.Repeat = cfg.repeat
	}
	if cfg.lockers > 1 {
		rep.Config.Lockers = cfg.lockers
	}
	if slices.ContainsFunc(cfg.scenarios, isElectionScenario) {
		rep.Config.ElectionTTLMs = cfg.electionTTL.Milliseconds()
		rep.Config.Campaigners = cfg.campaigners
		if slices.Contains(cfg.scenarios, failoverScenario) {
			rep.Config.Failovers = cfg.failovers
		}
	}
	for _, s := range scenarios {
		info := ScenarioInfo{Name: s.name, Description: s.desc, Available: true, Phases: []PhaseInfo{}}
		for _, p := range s.phaseList() {
			paused := []int{}
			for _, i := range p.paused {
				if i < ms.info.N {
					paused = append(paused, i)
				}
			}
			info.Phases = append(info.Phases, PhaseInfo{Name: p.name, From: p.from, To: p.to, PausedMasters: paused})
		}
		rep.Scenarios = append(rep.Scenarios, info)
	}
	return rep
}

// newRunID names this run's keys, so runs sharing masters (-addrs) never
// touch each other's keys.
func newRunID() string { return rand.Text()[:10] }
