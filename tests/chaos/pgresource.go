package chaos

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/sqlfence"
	"github.com/quorumlab/redlock/sqlfence/pgtest"
	"github.com/quorumlab/redlock/sqlfence/pgxfence"
)

// The fenced resource of the mutex rows (workloads and constructed) is a
// Redis written with redlock.WriteFenced, or, with -chaos.resource
// postgres, a PostgreSQL written with pgxfence (module sqlfence): each
// fenced write is a transaction that records the fence and then appends to
// a log and overwrites a data row. Either is never faulted. The election
// rows keep their Redis.
var (
	resourceKind = flag.String("chaos.resource", "redis", "the mutex rows' fenced resource: redis (redlock.WriteFenced) or postgres (module sqlfence, a throwaway PostgreSQL per row; make chaos-pg)")
	pgIsolation  = flag.String("chaos.pg.isolation", "read-committed", "with -chaos.resource postgres: the fenced transactions' isolation level, read-committed or serializable")
)

// resourceStore is where a client's fenced writes go: a redis.Scripter
// (the resource Redis) or a *pgStore.
type resourceStore = any

// pgStore is the PostgreSQL resource: a throwaway server (nil in a
// subprocess client, which only connects) and a pool.
type pgStore struct {
	srv    *pgtest.Server
	dsn    string
	pool   *pgxpool.Pool
	fencer *pgxfence.Fencer
}

// pgSchema is the resource's own tables beside the fence table. seq is
// taken under the fence row's lock, so per resource its order is commit
// order.
const pgSchema = `CREATE TABLE IF NOT EXISTS chaos_log (seq bigserial PRIMARY KEY, resource text NOT NULL, fence numeric(20,0) NOT NULL, owner text NOT NULL, value text NOT NULL);
CREATE TABLE IF NOT EXISTS chaos_data (resource text PRIMARY KEY, fence numeric(20,0) NOT NULL, owner text NOT NULL, value text NOT NULL)`

const pgWrite = `WITH l AS (INSERT INTO chaos_log (resource, fence, owner, value) VALUES ($1, $2::text::numeric, $3, $4))
INSERT INTO chaos_data AS d VALUES ($1, $2::text::numeric, $3, $4)
ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, owner = EXCLUDED.owner, value = EXCLUDED.value`

// newResource returns the row's fenced resource, closed (and, for
// PostgreSQL, checked: no stale write applied) by tb's cleanups.
func newResource(tb testing.TB) resourceStore {
	tb.Helper()
	if *resourceKind != "postgres" {
		if *resourceKind != "redis" {
			tb.Fatalf("chaos: -chaos.resource %q: want redis or postgres", *resourceKind)
		}
		return lab.ForTest(tb, 1, nil).Client(0)
	}
	srv, err := pgtest.Start(tb.Context())
	if errors.Is(err, pgtest.ErrUnavailable) {
		tb.Skipf("-chaos.resource postgres: %v", err)
	}
	if err != nil {
		tb.Fatalf("chaos: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Stop() })
	p, err := openPG(tb.Context(), srv.DSN())
	if err != nil {
		tb.Fatalf("chaos: %v", err)
	}
	p.srv = srv
	tb.Cleanup(p.pool.Close)
	if err := p.fencer.CreateTable(tb.Context()); err != nil {
		tb.Fatalf("chaos: %v", err)
	}
	if _, err := p.pool.Exec(tb.Context(), pgSchema); err != nil {
		tb.Fatalf("chaos: %v", err)
	}
	tb.Cleanup(func() { // after the row, before the pool closes
		s, err := p.applied(context.Background())
		switch {
		case err != nil:
			tb.Errorf("chaos: reading the PostgreSQL log: %v", err)
		case s.stale > 0:
			tb.Errorf("postgres: %d stale writes applied at the database; first: %s", s.stale, s.first)
		default:
			tb.Logf("%s", s)
		}
	})
	return p
}

func openPG(ctx context.Context, dsn string) (*pgStore, error) {
	iso := sql.LevelReadCommitted
	switch *pgIsolation {
	case "read-committed":
	case "serializable":
		iso = sql.LevelSerializable
	default:
		return nil, fmt.Errorf("-chaos.pg.isolation %q: want read-committed or serializable", *pgIsolation)
	}
	pool, err := pgxpool.New(ctx, dsn+" pool_max_conns=8")
	if err != nil {
		return nil, err
	}
	f, err := pgxfence.New(pool, &sqlfence.Options{Isolation: iso, MaxAttempts: 100})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &pgStore{dsn: dsn, pool: pool, fencer: f}, nil
}

// fenceHolder is a lock as sqlfence sees it.
type fenceHolder struct {
	fence uint64
	token string
}

func (h fenceHolder) Fence() uint64 { return h.fence }
func (h fenceHolder) Token() string { return h.token }

// writeFenced is the fenced write to db: redlock.WriteFenced on a Redis,
// a sqlfence transaction on PostgreSQL. Both return an error matching
// redlock.ErrStaleFence for a stale holder.
func writeFenced(ctx context.Context, db resourceStore, key string, fence uint64, owner, value string) error {
	switch d := db.(type) {
	case *pgStore:
		// A holder frozen inside its transaction keeps the fence row
		// locked, and the next holder's write waits for it (design.md
		// §5.1): up to 3 TTL in the client-pause row, longer than the
		// Redis rows' writeTimeout. The wait is the resource's, not a
		// failure, so a PostgreSQL write gets pgWriteTimeout instead.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
		defer cancel()
		return d.fencer.Do(ctx, key, fenceHolder{fence, owner}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, pgWrite, key, strconv.FormatUint(fence, 10), owner, value)
			return err
		})
	case redis.Scripter:
		return redlock.WriteFenced(ctx, d, key, fence, owner, value)
	}
	return fmt.Errorf("chaos: no fenced resource of type %T", db)
}

// setResource tells a subprocess client where the resource is.
func setResource(cfg *ClientConfig, db resourceStore) {
	switch d := db.(type) {
	case *pgStore:
		cfg.ResourceSQL = d.dsn
	case *redis.Client:
		cfg.ResourceDB = d.Options().Addr
	}
}

// helperResource is a subprocess client's resource: PostgreSQL if the
// parent gave a DSN, else rdb (the resource Redis); close releases it.
func helperResource(ctx context.Context, cfg ClientConfig, rdb *redis.Client) (db resourceStore, close func(), err error) {
	if cfg.ResourceSQL == "" {
		return rdb, func() {}, nil
	}
	p, err := openPG(ctx, cfg.ResourceSQL)
	if err != nil {
		return nil, nil, err
	}
	return p, p.pool.Close, nil
}

// pgApplied is what the database applied: its log in commit order.
type pgApplied struct {
	writes, resources, stale int
	first                    string
}

func (s pgApplied) String() string {
	return fmt.Sprintf("postgres (%s): %d fenced writes committed on %d resources, %d stale applied", *pgIsolation, s.writes, s.resources, s.stale)
}

// applied reads the log and counts the stale writes applied: per
// resource, in commit order, a fence below the one before it, or equal
// to it from another token.
func (p *pgStore) applied(ctx context.Context) (pgApplied, error) {
	var s pgApplied
	rows, err := p.pool.Query(ctx, "SELECT resource, fence::text, owner FROM chaos_log ORDER BY resource, seq")
	if err != nil {
		return s, err
	}
	defer rows.Close()
	var lastRes, lastOwner string
	var lastFence uint64
	for rows.Next() {
		var res, fs, owner string
		if err := rows.Scan(&res, &fs, &owner); err != nil {
			return s, err
		}
		f, err := strconv.ParseUint(fs, 10, 64)
		if err != nil {
			return s, err
		}
		s.writes++
		if res != lastRes {
			s.resources++
		} else if f < lastFence || (f == lastFence && owner != lastOwner) {
			if s.stale == 0 {
				s.first = fmt.Sprintf("%s: fence %d committed after fence %d", res, f, lastFence)
			}
			s.stale++
		}
		lastRes, lastFence, lastOwner = res, f, owner
	}
	return s, rows.Err()
}

// resourceNotes is the database's side of a row, for its Notes ("" for
// a Redis resource).
func resourceNotes(tb testing.TB, db resourceStore, notes string) string {
	p, ok := db.(*pgStore)
	if !ok {
		return notes
	}
	s, err := p.applied(tb.Context())
	if err != nil {
		tb.Errorf("chaos: reading the PostgreSQL log: %v", err)
		return notes
	}
	return strings.TrimPrefix(notes+"; "+s.String(), "; ")
}

// pgTTL is the lock TTL of the rows whose resource is PostgreSQL. A
// section's two writes are transactions there, not one script call: on
// a shared 2-core machine under load (load average 20 to 28) the long run
// at the Redis rows' 500 ms saw 25 of 100 030 sections exit past their
// deadline, holders slowed past the TTL (assumption 3), not a fault of
// the schedule. The TTL must cover the section, writes included
// (docs/choosing.md, "Sizing a TTL"); the schedule's pauses, delays and
// jumps scale with it.
const pgTTL = 2 * time.Second

// pgWriteTimeout bounds a fenced write to PostgreSQL: past the longest
// client pause (3 TTL), which a write may wait out behind the fence row.
const pgWriteTimeout = 4 * pgTTL

// forResource adapts the workloads to the resource: with PostgreSQL, a
// TTL of at least pgTTL.
func forResource(ws []Workload) []Workload {
	if *resourceKind != "postgres" {
		return ws
	}
	for i := range ws {
		ws[i].Plan.TTL = max(ws[i].Plan.TTL, pgTTL)
	}
	return ws
}
