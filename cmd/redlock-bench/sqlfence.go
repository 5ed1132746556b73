//go:build sqlfence

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/sqlfence"
	"github.com/quorumlab/redlock/sqlfence/pgtest"
	"github.com/quorumlab/redlock/sqlfence/pgxfence"
)

// sqlfenceBuilt: -scenarios sqlfence works in this build (extras.go).
const sqlfenceBuilt = true

// sqlfenceDSNEnv names a PostgreSQL to use instead of a throwaway one the
// bench starts (package sqlfence/pgtest: Debian's postgresql binaries).
const sqlfenceDSNEnv = "REDLOCK_BENCH_PG"

// The variants of the sqlfence scenario: one SQL write (an UPDATE of one
// row in a transaction) per operation, guarded four ways.
var sqlfenceVariants = []struct{ name, desc string }{
	{"rowlock", "no distributed lock: BEGIN; SELECT … FOR UPDATE; UPDATE; COMMIT"},
	{"redlock", "Lock (no fencing); BEGIN; UPDATE; COMMIT; Unlock"},
	{"redlock-fencing", "Lock (Options.Fencing: its second round); BEGIN; UPDATE; COMMIT; Unlock: the fence is not checked"},
	{"redlock-sqlfence", "Lock (Options.Fencing); pgxfence Do: BEGIN; the fence upsert; UPDATE; COMMIT; Unlock"},
}

// sqlfenceRow is one variant × mode × workers: the median of -repeat runs.
type sqlfenceRow struct {
	Variant   string    `json:"variant"`
	Mode      string    `json:"mode"` // contended: one row and one lock; uncontended: each worker its own
	Workers   int       `json:"workers"`
	Ops       int       `json:"ops"`
	OpsPerSec float64   `json:"ops_per_sec"`
	P50Ms     float64   `json:"p50_ms"`
	P99Ms     float64   `json:"p99_ms"`
	Errors    int       `json:"errors"`
	RunsOps   []float64 `json:"ops_per_sec_runs"`
}

type sqlfenceReport struct {
	Postgres string
	Masters  string
	Duration time.Duration
	Repeat   int
	Rows     []sqlfenceRow
}

// sqlfenceEnv is what a run needs: the database and two Lockers.
type sqlfenceEnv struct {
	pool          *pgxpool.Pool
	fencer        *pgxfence.Fencer
	plain, fenced *ours
	workers       int
	duration      time.Duration
}

// runSQLFence measures the variants interleaved: for each repeat, each
// mode and worker count, each variant in turn (the order alternating
// between repeats), reporting each one's median run.
func runSQLFence(ctx context.Context, ms *masters, cfg *config, stderr io.Writer) (rep *sqlfenceReport, err error) {
	dsn := os.Getenv(sqlfenceDSNEnv)
	rep = &sqlfenceReport{Masters: fmt.Sprintf("%d %s masters", ms.info.N, ms.info.Kind), Duration: cfg.duration, Repeat: cfg.repeat}
	if dsn == "" {
		srv, err := pgtest.Start(ctx)
		if err != nil {
			return nil, fmt.Errorf("sqlfence: %w (or set %s to a PostgreSQL DSN)", err, sqlfenceDSNEnv)
		}
		defer func() { err = errors.Join(err, srv.Stop()) }()
		dsn = srv.DSN()
		rep.Postgres = "PostgreSQL " + srv.Version + " started by the bench (Unix socket, fsync off)"
	} else {
		rep.Postgres = "PostgreSQL at $" + sqlfenceDSNEnv
	}
	maxW := slices.Max(cfg.workers)
	pool, err := pgxpool.New(ctx, fmt.Sprintf("%s pool_max_conns=%d", dsn, maxW+2))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	f, err := pgxfence.New(pool, &sqlfence.Options{Table: "rlbench_fences"})
	if err != nil {
		return nil, err
	}
	env := sqlfenceEnv{pool: pool, fencer: f, duration: cfg.duration}
	if err := env.setup(ctx, maxW); err != nil {
		return nil, err
	}
	if env.plain, err = openOurs(ms.opts, redlock.Options{TTL: cfg.ttl, KeyPrefix: keyPrefix}); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, env.plain.close()) }()
	if env.fenced, err = openOurs(ms.opts, redlock.Options{TTL: cfg.ttl, KeyPrefix: keyPrefix, Fencing: true}); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, env.fenced.close()) }()

	runs := map[string][]sqlfenceRow{}
	var order []string
	for rep := range cfg.repeat {
		for _, mode := range []string{"contended", "uncontended"} {
			for _, w := range cfg.workers {
				vs := slices.Clone(sqlfenceVariants)
				if rep%2 == 1 {
					slices.Reverse(vs)
				}
				for _, v := range vs {
					env.workers = w
					r, err := env.run(ctx, v.name, mode)
					if err != nil {
						return nil, fmt.Errorf("sqlfence %s %s %d workers: %w", v.name, mode, w, err)
					}
					fmt.Fprintf(stderr, "sqlfence: %-16s %-11s %3d workers: %8.0f ops/s\n", v.name, mode, w, r.OpsPerSec)
					k := fmt.Sprintf("%s/%d/%s", mode, w, v.name)
					if _, ok := runs[k]; !ok {
						order = append(order, k)
					}
					runs[k] = append(runs[k], r)
				}
			}
		}
	}
	for _, k := range order {
		all := runs[k]
		sorted := slices.Clone(all)
		slices.SortFunc(sorted, func(a, b sqlfenceRow) int { return cmpFloat(a.OpsPerSec, b.OpsPerSec) })
		m := sorted[(len(sorted)-1)/2]
		for _, r := range all {
			m.RunsOps = append(m.RunsOps, r.OpsPerSec)
		}
		rep.Rows = append(rep.Rows, m)
	}
	slices.SortStableFunc(rep.Rows, func(a, b sqlfenceRow) int {
		if a.Mode != b.Mode {
			return map[bool]int{true: -1, false: 1}[a.Mode == "contended"]
		}
		return a.Workers - b.Workers
	})
	return rep, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// setup makes the bench's tables: accounts 0..n (one row each worker
// when uncontended, row 0 when contended) and the fence table.
func (e *sqlfenceEnv) setup(ctx context.Context, n int) error {
	if err := e.fencer.CreateTable(ctx); err != nil {
		return err
	}
	_, err := e.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS rlbench_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO rlbench_accounts SELECT g, 0 FROM generate_series(0, `+fmt.Sprint(n)+`) g ON CONFLICT DO NOTHING`)
	return err
}

const sqlfenceUpdate = `UPDATE rlbench_accounts SET balance = balance + 1 WHERE id = $1`

// op is one operation of a variant on row id under lock name.
func (e *sqlfenceEnv) op(ctx context.Context, variant, name string, id int) error {
	write := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sqlfenceUpdate, id)
		return err
	}
	switch variant {
	case "rowlock":
		return pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			var b int64
			if err := tx.QueryRow(ctx, `SELECT balance FROM rlbench_accounts WHERE id = $1 FOR UPDATE`, id).Scan(&b); err != nil {
				return err
			}
			return write(tx)
		})
	case "redlock", "redlock-fencing":
		o := e.plain
		if variant == "redlock-fencing" {
			o = e.fenced
		}
		lk, err := o.l.Lock(ctx, name)
		if err != nil {
			return err
		}
		err = pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{}, write)
		return errors.Join(err, lk.Unlock(context.Background()))
	case "redlock-sqlfence":
		lk, err := e.fenced.l.Lock(ctx, name)
		if err != nil {
			return err
		}
		err = e.fencer.Do(ctx, name, lk, write)
		return errors.Join(err, lk.Unlock(context.Background()))
	}
	return fmt.Errorf("no variant %q", variant)
}

// run runs e.workers workers of variant for e.duration.
func (e *sqlfenceEnv) run(ctx context.Context, variant, mode string) (sqlfenceRow, error) {
	row := sqlfenceRow{Variant: variant, Mode: mode, Workers: e.workers}
	ctx, cancel := context.WithTimeout(ctx, e.duration)
	defer cancel()
	lats := make([][]time.Duration, e.workers)
	errs := make([]int, e.workers)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	for w := range e.workers {
		id, name := 0, "sqlfence-shared"
		if mode == "uncontended" {
			id, name = w+1, fmt.Sprintf("sqlfence-%d", w+1)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				err := e.op(ctx, variant, name, id)
				switch {
				case err == nil:
					lats[w] = append(lats[w], time.Since(t0))
				case ctx.Err() != nil:
					return // the window closed during the operation
				default:
					errs[w]++
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(began)
	var all []time.Duration
	for w := range e.workers {
		all = append(all, lats[w]...)
		row.Errors += errs[w]
	}
	if row.Errors > 0 && len(all) == 0 {
		return row, firstErr
	}
	row.Ops = len(all)
	row.OpsPerSec = float64(len(all)) / el.Seconds()
	ms := durationsMs(all)
	row.P50Ms, row.P99Ms = percentile(ms, 50), percentile(ms, 99)
	return row, nil
}

func renderSQLFence(w io.Writer, r *sqlfenceReport) error {
	fmt.Fprintf(w, "sqlfence: one UPDATE in a transaction per operation, on %s and %s; %v per run, median of %d interleaved runs\n",
		r.Masters, r.Postgres, r.Duration, r.Repeat)
	for _, v := range sqlfenceVariants {
		fmt.Fprintf(w, "  %-17s %s\n", v.name, v.desc)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tworkers\tvariant\tops/s\tp50 ms\tp99 ms\terrors\truns ops/s\t")
	for _, x := range r.Rows {
		runs := ""
		for i, o := range x.RunsOps {
			if i > 0 {
				runs += " "
			}
			runs += fmt.Sprintf("%.0f", o)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.2f\t%.2f\t%d\t%s\t\n", x.Mode, x.Workers, x.Variant, x.OpsPerSec, x.P50Ms, x.P99Ms, x.Errors, runs)
	}
	return tw.Flush()
}
