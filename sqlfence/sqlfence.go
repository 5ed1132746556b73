// Package sqlfence runs a lock holder's SQL writes in one transaction that
// commits only if the lock's fence is still the largest the resource has
// seen: the other half of fencing (redlock.Options.Fencing, Lock.Fence),
// checked where the data lives.
//
// A fence table (CreateTable; DefaultTable unless Options.Table says
// otherwise) holds, per resource name, the largest fence accepted and its
// owner, the hex SHA-256 of the lock's token. Do starts a transaction,
// runs one statement against that table and then the caller's function:
//
//	INSERT INTO redlock_fences AS f (resource, fence, owner) VALUES ($1, $2, $3)
//	ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, owner = EXCLUDED.owner
//	WHERE f.fence < EXCLUDED.fence OR (f.fence = EXCLUDED.fence AND f.owner = EXCLUDED.owner)
//	RETURNING true
//
// No row back means a larger fence (or the same fence from another token)
// was recorded first: Do rolls back without calling the function and
// returns an error for which errors.Is(err, redlock.ErrStaleFence). The
// rule is redlock.WriteFenced's: a fence larger than the recorded one, or
// equal to it with the same token (one holder writing twice), is accepted.
//
// The statement takes the fence row's lock, held to commit or rollback,
// so every fenced transaction on one resource runs after the one before
// it has ended: the fences of the transactions that commit never go down,
// in commit order, whatever the holders' clocks and pauses. Under READ
// COMMITTED (PostgreSQL's default) a transaction waiting for that lock
// re-reads the row once the holder commits and is then accepted or
// rejected against it. Under REPEATABLE READ and SERIALIZABLE the waiter
// fails with a serialization failure instead (SQLSTATE 40001); Do rolls
// back and runs the whole transaction again, the function included, up to
// Options.MaxAttempts times. The function must therefore have no effects
// outside the transaction. The guarantee covers writes made through Do on
// the same resource name: a writer that bypasses the fence table is not
// ordered by it.
//
// Package sqlfence needs only database/sql and works with any PostgreSQL
// driver; package pgxfence is the same on a pgx connection or pool. The
// statement is PostgreSQL's (ON CONFLICT ... WHERE, RETURNING); for other
// databases, docs/design.md §5 gives the statement to write.
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/quorumlab/redlock/sqlfence/internal/fencesql"
)

// DefaultTable is the fence table's name when Options.Table is empty.
const DefaultTable = fencesql.DefaultTable

// Holder is what a fenced write needs of a lock: *redlock.Lock is one.
type Holder = fencesql.Holder

// Options configure a Fencer; the zero value is usable.
type Options struct {
	// Table is the fence table, schema-qualified or not ("" is
	// DefaultTable). Each part is quoted as an identifier.
	Table string
	// Isolation is the transactions' isolation level; LevelDefault is the
	// server's default (READ COMMITTED unless configured otherwise). READ
	// COMMITTED, REPEATABLE READ and SERIALIZABLE all keep the guarantee.
	Isolation sql.IsolationLevel
	// MaxAttempts bounds the transactions one call starts when PostgreSQL
	// rolls one back for a serialization failure or a deadlock (0 is 10).
	MaxAttempts int
}

// Fencer runs fenced transactions on one database.
type Fencer struct {
	db   *sql.DB
	st   fencesql.Statements
	opts Options
}

// New returns a Fencer on db; opts may be nil.
func New(db *sql.DB, opts *Options) (*Fencer, error) {
	if db == nil {
		return nil, errors.New("sqlfence: nil database")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts < 0 {
		return nil, fmt.Errorf("sqlfence: MaxAttempts %d is negative", o.MaxAttempts)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = fencesql.DefaultMaxAttempts
	}
	st, err := fencesql.New(o.Table)
	if err != nil {
		return nil, err
	}
	return &Fencer{db: db, st: st, opts: o}, nil
}

// CreateTable creates the fence table if it does not exist. Run it once,
// as a migration would: PostgreSQL may fail concurrent CREATE TABLE IF NOT
// EXISTS of one name.
func (f *Fencer) CreateTable(ctx context.Context) error {
	if _, err := f.db.ExecContext(ctx, f.st.Create); err != nil {
		return fmt.Errorf("sqlfence: create table %q: %w", f.st.Table, err)
	}
	return nil
}

// Do runs fn in a transaction that first records h's fence for resource
// and commits only if that was accepted (see the package documentation).
// A stale holder gets an error matching redlock.ErrStaleFence and fn is
// not called; an error from fn rolls back and is returned as it is. fn may
// run more than once (a serialization failure starts the transaction
// again) and must not keep tx.
func (f *Fencer) Do(ctx context.Context, resource string, h Holder, fn func(tx *sql.Tx) error) error {
	fence, owner, err := fencesql.Args(resource, h)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err = f.once(ctx, resource, fence, owner, h.Fence(), fn)
		if err == nil || !fencesql.Retryable(err) || attempt >= f.opts.MaxAttempts || ctx.Err() != nil {
			return err
		}
	}
}

func (f *Fencer) once(ctx context.Context, resource, fence, owner string, n uint64, fn func(*sql.Tx) error) (err error) {
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{Isolation: f.opts.Isolation})
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var ok bool
	switch err = tx.QueryRowContext(ctx, f.st.Fence, resource, fence, owner).Scan(&ok); {
	case errors.Is(err, sql.ErrNoRows):
		return fencesql.Stale(resource, n)
	case err != nil:
		return fmt.Errorf("sqlfence: fence %q: %w", resource, err)
	}
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// Fence returns the largest fence recorded for resource (0 if none).
func (f *Fencer) Fence(ctx context.Context, resource string) (uint64, error) {
	var s sql.NullString
	err := f.db.QueryRowContext(ctx, f.st.Read, resource).Scan(&s)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sqlfence: read fence %q: %w", resource, err)
	}
	return fencesql.ParseFence(s)
}
