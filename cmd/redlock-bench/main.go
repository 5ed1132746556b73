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
	if code, ok := asChild(); ok {
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
	b := &benchRun{cfg: cfg, stdout: stdout, stderr: stderr, began: time.Now()}
	if b.tel, err = newBenchTelemetry(cfg.metricsAddr, stderr); err != nil {
		return err
	}
	defer b.tel.shutdown()
	// etcd first: without it on PATH the run fails before anything starts.
	if slices.Contains(cfg.impls, etcdImplName) {
		if b.etcd, err = startEtcd(ctx, stderr); err != nil {
			return err
		}
		defer b.etcd.close()
	}
	if b.ms, err = openMasters(ctx, cfg, stderr); err != nil {
		return err
	}
	defer b.ms.shutdown()
	if done, err := b.ownTables(ctx); done || err != nil {
		return err
	}
	return b.measure(ctx)
}

// benchRun is one run of the bench once its servers are up: the
// configuration, the masters and what the cells share.
type benchRun struct {
	cfg    *config
	ms     *masters
	tel    *benchTelemetry
	etcd   *etcdServers // nil unless -impls names etcd
	stdout io.Writer
	stderr io.Writer
	began  time.Time
	runID  string // names the run's keys (newRunID)
}

// ownTables runs the scenarios with a table of their own (leases,
// sqlfence), printing each, and takes them off cfg.scenarios; done
// reports that no scenario is left.
func (b *benchRun) ownTables(ctx context.Context) (done bool, err error) {
	cfg := b.cfg
	if i := slices.Index(cfg.scenarios, "leases"); i >= 0 {
		cfg.scenarios = slices.Delete(cfg.scenarios, i, i+1)
		r, err := runLeases(ctx, b.ms, cfg.leases, cfg.ttl, cfg.duration, b.stderr)
		if err != nil {
			return true, fmt.Errorf("leases: %w", err)
		}
		if err := renderLeases(b.stdout, r, fmt.Sprintf("%d %s masters", b.ms.info.N, b.ms.info.Kind)); err != nil {
			return true, err
		}
		if len(cfg.scenarios) == 0 {
			return true, nil
		}
	}
	if i := slices.Index(cfg.scenarios, "sqlfence"); i >= 0 { // sqlfence.go
		cfg.scenarios = slices.Delete(cfg.scenarios, i, i+1)
		r, err := runSQLFence(ctx, b.ms, cfg, b.stderr)
		if err != nil {
			return true, fmt.Errorf("sqlfence: %w", err)
		}
		if err := renderSQLFence(b.stdout, r); err != nil {
			return true, err
		}
		if len(cfg.scenarios) == 0 {
			return true, nil
		}
	}
	return false, nil
}

// measure runs the cells and the election scenarios (under -cpuprofile),
// then prints the report and writes -json and -chart. An error that ends
// the run early still prints the cells that finished.
func (b *benchRun) measure(ctx context.Context) error {
	cfg := b.cfg
	rep := newReport(cfg, b.ms, b.began)
	rep.Etcd = b.etcd.info()
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
	b.runID = newRunID()
	runErr := b.runCells(ctx, cells, rep)
	if cfg.repeat > 1 {
		rep.Results = medianRuns(rep.Results)
	}
	if runErr == nil && slices.ContainsFunc(cfg.scenarios, isElectionScenario) {
		rep.Elections, runErr = b.elections(ctx)
	}
	rep.Ratios = computeRatios(rep.Results)
	rep.WallSeconds = time.Since(b.began).Seconds()

	errs := []error{runErr, renderTable(b.stdout, rep)}
	if cfg.jsonPath != "" {
		errs = append(errs, writeJSON(cfg.jsonPath, rep))
	}
	if cfg.chartPath != "" && len(rep.Results) > 0 {
		errs = append(errs, writeChart(cfg.chartPath, rep))
	}
	return errors.Join(errs...)
}

// runCells runs cells one after another, appending each result to
// rep.Results, and stops at the first that fails.
func (b *benchRun) runCells(ctx context.Context, cells []cell, rep *Report) error {
	prog := newProgress(b.stderr, b.cfg.quiet, len(cells))
	for i, c := range cells {
		res, err := runCell(ctx, c, cellEnv{ms: b.ms, duration: b.cfg.duration, ttl: b.cfg.ttl,
			lockers: b.cfg.lockers, run: b.runID, index: i, progress: prog, tel: b.tel, etcd: b.etcd})
		if err != nil {
			if ctx.Err() != nil {
				// Interrupted: report the cells that finished.
				return fmt.Errorf("interrupted after %d of %d cells: %w", i, len(cells), err)
			}
			return err
		}
		rep.Results = append(rep.Results, res)
	}
	return nil
}

// elections runs the election scenarios (election.go).
func (b *benchRun) elections(ctx context.Context) ([]ElectionResult, error) {
	cfg := b.cfg
	er := electionRun{scenarios: cfg.scenarios, impls: cfg.electionImpls(), campaigners: cfg.campaigners,
		failovers: cfg.failovers, repeat: cfg.repeat, duration: cfg.duration, runID: b.runID, ms: b.ms, stderr: b.stderr,
		env: electionEnv{masters: b.ms.opts, ttl: cfg.electionTTL}}
	if b.etcd != nil {
		er.env.etcd = b.etcd.endpoints
	}
	res, err := runElections(ctx, er)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted in the election scenarios: %w", err)
	}
	return res, err
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
