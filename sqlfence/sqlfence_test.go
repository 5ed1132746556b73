package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/sqlfence"
	"github.com/quorumlab/redlock/sqlfence/pgxfence"
)

// holder is a lock as the fence sees it: a fence and a token.
type holder struct {
	fence uint64
	token string
}

func (h holder) Fence() uint64 { return h.fence }
func (h holder) Token() string { return h.token }

var tableSeq atomic.Int64

// fixture is one test's tables on the shared server: a fence table, a
// log of the writes that committed (seq is taken after the fence check,
// under the fence row's lock, so seq order is commit order) and a data
// row the writes overwrite.
type fixture struct {
	db                *sql.DB
	pool              *pgxpool.Pool
	fences, log, data string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := needServer(t)
	db, err := sql.Open("pgx", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	pool, err := pgxpool.New(t.Context(), srv.DSN()+" pool_max_conns=32")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	n := tableSeq.Add(1)
	fx := &fixture{db: db, pool: pool,
		fences: fmt.Sprintf("fences_%d", n), log: fmt.Sprintf("log_%d", n), data: fmt.Sprintf("data_%d", n)}
	for _, q := range []string{
		"CREATE TABLE " + fx.log + " (seq bigserial PRIMARY KEY, resource text, fence numeric(20,0), owner text)",
		"CREATE TABLE " + fx.data + " (resource text PRIMARY KEY, fence numeric(20,0), owner text)",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	f, err := sqlfence.New(db, &sqlfence.Options{Table: fx.fences})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return fx
}

// api is one of the two packages, running the fixture's write (a log row
// and the data row) in a fenced transaction; pause, if set, runs between
// the fence check and the write.
type api struct {
	name string
	do   func(ctx context.Context, fx *fixture, iso sql.IsolationLevel, resource string, h holder, pause func()) error
}

func write(resource string, h holder, fx *fixture) (string, []any) {
	return "WITH l AS (INSERT INTO " + fx.log + " (resource, fence, owner) VALUES ($1, $2::text::numeric, $3)) " +
			"INSERT INTO " + fx.data + " AS d VALUES ($1, $2::text::numeric, $3) ON CONFLICT (resource) " +
			"DO UPDATE SET fence = EXCLUDED.fence, owner = EXCLUDED.owner",
		[]any{resource, fmt.Sprint(h.fence), h.token}
}

var apis = []api{
	{"database-sql", func(ctx context.Context, fx *fixture, iso sql.IsolationLevel, resource string, h holder, pause func()) error {
		f, err := sqlfence.New(fx.db, &sqlfence.Options{Table: fx.fences, Isolation: iso, MaxAttempts: 1000})
		if err != nil {
			return err
		}
		return f.Do(ctx, resource, h, func(tx *sql.Tx) error {
			if pause != nil {
				pause()
			}
			q, args := write(resource, h, fx)
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		})
	}},
	{"pgx", func(ctx context.Context, fx *fixture, iso sql.IsolationLevel, resource string, h holder, pause func()) error {
		f, err := pgxfence.New(fx.pool, &sqlfence.Options{Table: fx.fences, Isolation: iso, MaxAttempts: 1000})
		if err != nil {
			return err
		}
		return f.Do(ctx, resource, h, func(tx pgx.Tx) error {
			if pause != nil {
				pause()
			}
			q, args := write(resource, h, fx)
			_, err := tx.Exec(ctx, q, args...)
			return err
		})
	}},
}

var levels = []struct {
	name string
	iso  sql.IsolationLevel
}{
	{"read-committed", sql.LevelReadCommitted},
	{"serializable", sql.LevelSerializable},
}

// each runs body for every package and isolation level.
func each(t *testing.T, body func(t *testing.T, a api, iso sql.IsolationLevel)) {
	for _, a := range apis {
		for _, l := range levels {
			t.Run(a.name+"/"+l.name, func(t *testing.T) { body(t, a, l.iso) })
		}
	}
}

type logRow struct {
	fence uint64
	owner string
}

// committed is the log of resource in commit order.
func (fx *fixture) committed(t *testing.T, resource string) []logRow {
	t.Helper()
	rows, err := fx.db.QueryContext(t.Context(), "SELECT fence::text, owner FROM "+fx.log+" WHERE resource = $1 ORDER BY seq", resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []logRow
	for rows.Next() {
		var s string
		var r logRow
		if err := rows.Scan(&s, &r.owner); err != nil {
			t.Fatal(err)
		}
		fmt.Sscan(s, &r.fence)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// staleApplied counts the committed writes that are stale: a fence below
// one committed before it, or equal to it from another token.
func staleApplied(log []logRow) (n int, first string) {
	for i := 1; i < len(log); i++ {
		p, c := log[i-1], log[i]
		if c.fence < p.fence || (c.fence == p.fence && c.owner != p.owner) {
			if n == 0 {
				first = fmt.Sprintf("write %d (fence %d, %s) committed after fence %d (%s)", i, c.fence, c.owner, p.fence, p.owner)
			}
			n++
		}
	}
	return n, first
}

// The checker sees a smaller fence, and an equal one from another token.
func TestStaleAppliedChecker(t *testing.T) {
	ok := []logRow{{1, "a"}, {1, "a"}, {2, "b"}, {9, "c"}}
	if n, _ := staleApplied(ok); n != 0 {
		t.Fatalf("%d stale in %v", n, ok)
	}
	bad := []logRow{{1, "a"}, {3, "b"}, {2, "c"}, {2, "d"}, {5, "e"}}
	if n, _ := staleApplied(bad); n != 2 {
		t.Fatalf("%d stale in %v, want 2", n, bad)
	}
}

func TestRule(t *testing.T) {
	each(t, func(t *testing.T, a api, iso sql.IsolationLevel) {
		fx := newFixture(t)
		ctx := t.Context()
		steps := []struct {
			h     holder
			stale bool
		}{
			{holder{5, "a"}, false},
			{holder{5, "a"}, false}, // the same holder again
			{holder{5, "b"}, true},  // the same fence from another token
			{holder{4, "c"}, true},  // a smaller fence
			{holder{6, "b"}, false},
			{holder{5, "a"}, true},
			{holder{1<<64 - 2, "d"}, false}, // exact beyond 2^53 and 2^63
			{holder{1<<64 - 3, "e"}, true},
			{holder{1<<64 - 1, "e"}, false},
		}
		for i, s := range steps {
			err := a.do(ctx, fx, iso, "r", s.h, nil)
			switch {
			case s.stale && !errors.Is(err, redlock.ErrStaleFence):
				t.Fatalf("step %d (fence %d, %s): err %v, want ErrStaleFence", i, s.h.fence, s.h.token, err)
			case !s.stale && err != nil:
				t.Fatalf("step %d (fence %d, %s): %v", i, s.h.fence, s.h.token, err)
			}
		}
		log := fx.committed(t, "r")
		if len(log) != 5 {
			t.Fatalf("%d writes committed, want 5: %v", len(log), log)
		}
		if n, first := staleApplied(log); n > 0 {
			t.Fatalf("%d stale writes applied; first: %s", n, first)
		}
		f, _ := sqlfence.New(fx.db, &sqlfence.Options{Table: fx.fences})
		if got, err := f.Fence(ctx, "r"); err != nil || got != 1<<64-1 {
			t.Fatalf("Fence = %d, %v; want 2^64-1", got, err)
		}
		if got, err := f.Fence(ctx, "other"); err != nil || got != 0 {
			t.Fatalf("Fence of an unwritten resource = %d, %v; want 0", got, err)
		}
	})
}

// An error from the caller's function rolls back the fence with the
// writes: the next holder is judged against the fence before it.
func TestErrorRollsBackTheFence(t *testing.T) {
	fx := newFixture(t)
	f, err := sqlfence.New(fx.db, &sqlfence.Options{Table: fx.fences})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := f.Do(t.Context(), "r", holder{3, "a"}, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.Do(t.Context(), "r", holder{9, "b"}, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the function's", err)
	}
	if got, _ := f.Fence(t.Context(), "r"); got != 3 {
		t.Fatalf("fence %d after a rolled-back write, want 3", got)
	}
	if err := f.Do(t.Context(), "r", holder{4, "c"}, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatalf("fence 4 after the rollback of 9: %v", err)
	}
}

func TestArguments(t *testing.T) {
	db, err := sql.Open("pgx", "host=/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := sqlfence.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	noop := func(*sql.Tx) error { return nil }
	for name, err := range map[string]error{
		"fence 0":        f.Do(t.Context(), "r", holder{0, "a"}, noop),
		"empty token":    f.Do(t.Context(), "r", holder{1, ""}, noop),
		"empty resource": f.Do(t.Context(), "", holder{1, "a"}, noop),
		"nil holder":     f.Do(t.Context(), "r", nil, noop),
	} {
		if err == nil || errors.Is(err, redlock.ErrStaleFence) {
			t.Errorf("%s: err %v, want an argument error", name, err)
		}
	}
	if _, err := sqlfence.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := sqlfence.New(db, &sqlfence.Options{Table: "a..b"}); err == nil {
		t.Error("an empty name part was accepted")
	}
	if _, err := pgxfence.New(nil, nil); err == nil {
		t.Error("pgxfence.New(nil) succeeded")
	}
}

// Concurrent holders on one resource with fences that go down, repeat
// from the same token and repeat from other tokens: whatever commits, in
// commit order, is never stale.
func TestConcurrentHolders(t *testing.T) {
	const workers, writes = 8, 30
	each(t, func(t *testing.T, a api, iso sql.IsolationLevel) {
		fx := newFixture(t)
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		var accepted, stale atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				var last holder
				for i := range writes {
					// Fences drift up with i, so that some commit, and
					// each worker's go down and repeat others'.
					h := holder{uint64(2*i + 1 + rng.IntN(10)), fmt.Sprintf("w%d-%d", w, i)}
					if i > 0 && rng.IntN(4) == 0 {
						h = last // the same holder writes again
					}
					last = h
					switch err := a.do(t.Context(), fx, iso, "r", h, nil); {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, redlock.ErrStaleFence):
						stale.Add(1)
					default:
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		log := fx.committed(t, "r")
		if int64(len(log)) != accepted.Load() {
			t.Fatalf("%d writes committed, %d calls accepted: a rejected call wrote", len(log), accepted.Load())
		}
		if n, first := staleApplied(log); n > 0 {
			t.Fatalf("%d stale writes applied; first: %s", n, first)
		}
		f, _ := sqlfence.New(fx.db, &sqlfence.Options{Table: fx.fences})
		if got, _ := f.Fence(t.Context(), "r"); got != log[len(log)-1].fence {
			t.Fatalf("fence table holds %d, the last write %d", got, log[len(log)-1].fence)
		}
		t.Logf("%d accepted, %d stale, 0 stale applied", accepted.Load(), stale.Load())
	})
}

// waitForLockWaiters returns once n backends wait for a lock: the
// handshake that shows a second holder is blocked behind the first.
func waitForLockWaiters(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	for {
		var got int
		err := db.QueryRowContext(t.Context(),
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// A holder pauses between its fence check and its commit while another
// arrives: the second waits on the fence row, then is judged against the
// first's fence. With the first holding the larger fence, the second is
// rejected; with the smaller, both commit, in fence order.
func TestPauseBetweenCheckAndCommit(t *testing.T) {
	cases := []struct {
		name          string
		first, second holder
		secondStale   bool
	}{
		{"larger-pauses", holder{7, "new"}, holder{6, "old"}, true},
		{"same-fence-other-token", holder{7, "a"}, holder{7, "b"}, true},
		{"smaller-pauses", holder{6, "old"}, holder{7, "new"}, false},
	}
	each(t, func(t *testing.T, a api, iso sql.IsolationLevel) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t)
				checked, resume := make(chan struct{}), make(chan struct{})
				var once sync.Once
				firstDone := make(chan error, 1)
				go func() {
					firstDone <- a.do(t.Context(), fx, iso, "r", c.first, func() {
						once.Do(func() { close(checked); <-resume })
					})
				}()
				<-checked // the first holds the fence row
				secondDone := make(chan error, 1)
				var secondRan atomic.Int32
				go func() {
					secondDone <- a.do(t.Context(), fx, iso, "r", c.second, func() { secondRan.Add(1) })
				}()
				waitForLockWaiters(t, fx.db, 1) // the second is blocked on it
				close(resume)
				if err := <-firstDone; err != nil {
					t.Fatalf("first: %v", err)
				}
				err := <-secondDone
				if c.secondStale {
					if !errors.Is(err, redlock.ErrStaleFence) {
						t.Fatalf("second: err %v, want ErrStaleFence", err)
					}
					if secondRan.Load() != 0 {
						t.Fatal("the stale holder's function ran")
					}
				} else if err != nil {
					t.Fatalf("second: %v", err)
				}
				log := fx.committed(t, "r")
				if n, first := staleApplied(log); n > 0 {
					t.Fatalf("%d stale writes applied; first: %s", n, first)
				}
				want := 2
				if c.secondStale {
					want = 1
				}
				if len(log) != want || log[0] != (logRow{c.first.fence, c.first.token}) {
					t.Fatalf("committed %v, want the first's write then %d more", log, want-1)
				}
			})
		}
	})
}

// A holder that pauses before its check, past a later holder's commit
// (the case fencing is for), is rejected.
func TestPauseBeforeCheck(t *testing.T) {
	each(t, func(t *testing.T, a api, iso sql.IsolationLevel) {
		fx := newFixture(t)
		if err := a.do(t.Context(), fx, iso, "r", holder{8, "later"}, nil); err != nil {
			t.Fatal(err)
		}
		err := a.do(t.Context(), fx, iso, "r", holder{7, "paused"}, nil)
		if !errors.Is(err, redlock.ErrStaleFence) || !strings.Contains(err.Error(), "fence 7") {
			t.Fatalf("err %v, want ErrStaleFence naming fence 7", err)
		}
	})
}
