// Package pgxfence is package sqlfence on pgx (github.com/jackc/pgx/v5):
// the same table, statement and rule, run in a pgx.Tx from a *pgx.Conn or
// a *pgxpool.Pool. See package sqlfence for what a fenced transaction
// guarantees.
package pgxfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlab/redlock/sqlfence"
	"github.com/quorumlab/redlock/sqlfence/internal/fencesql"
)

// Beginner starts pgx transactions: *pgx.Conn and *pgxpool.Pool are two.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Fencer runs fenced transactions on one database.
type Fencer struct {
	db   Beginner
	st   fencesql.Statements
	iso  pgx.TxIsoLevel
	max  int
	read func(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier is what Fence needs; Conn and Pool have QueryRow.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// New returns a Fencer on db with sqlfence's options (nil for the
// defaults); Options.Isolation is mapped to pgx's levels.
func New(db Beginner, opts *sqlfence.Options) (*Fencer, error) {
	if db == nil {
		return nil, errors.New("pgxfence: nil database")
	}
	var o sqlfence.Options
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts < 0 {
		return nil, fmt.Errorf("pgxfence: MaxAttempts %d is negative", o.MaxAttempts)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = fencesql.DefaultMaxAttempts
	}
	iso, err := level(o.Isolation)
	if err != nil {
		return nil, err
	}
	st, err := fencesql.New(o.Table)
	if err != nil {
		return nil, err
	}
	f := &Fencer{db: db, st: st, iso: iso, max: o.MaxAttempts}
	if q, ok := db.(querier); ok {
		f.read = q.QueryRow
	}
	return f, nil
}

func level(l sql.IsolationLevel) (pgx.TxIsoLevel, error) {
	switch l {
	case sql.LevelDefault:
		return "", nil
	case sql.LevelReadCommitted:
		return pgx.ReadCommitted, nil
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		return pgx.RepeatableRead, nil
	case sql.LevelSerializable:
		return pgx.Serializable, nil
	}
	return "", fmt.Errorf("pgxfence: isolation level %v is not one PostgreSQL runs", l)
}

// CreateTable creates the fence table if it does not exist (once, as a
// migration would).
func (f *Fencer) CreateTable(ctx context.Context) error {
	return f.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, f.st.Create)
		return err
	})
}

func (f *Fencer) inTx(ctx context.Context, fn func(pgx.Tx) error) (err error) {
	tx, err := f.db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("pgxfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	if err = fn(tx); err != nil {
		return fmt.Errorf("pgxfence: create table %q: %w", f.st.Table, err)
	}
	return tx.Commit(ctx)
}

// Do is sqlfence.Fencer.Do on pgx: fn runs in a transaction that first
// records h's fence for resource, and only if that was accepted; a stale
// holder gets an error matching redlock.ErrStaleFence. fn may run more than
// once (after a serialization failure) and must not keep tx.
func (f *Fencer) Do(ctx context.Context, resource string, h sqlfence.Holder, fn func(tx pgx.Tx) error) error {
	fence, owner, err := fencesql.Args(resource, h)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err = f.once(ctx, resource, fence, owner, h.Fence(), fn)
		if err == nil || !fencesql.Retryable(err) || attempt >= f.max || ctx.Err() != nil {
			return err
		}
	}
}

func (f *Fencer) once(ctx context.Context, resource, fence, owner string, n uint64, fn func(pgx.Tx) error) (err error) {
	tx, err := f.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: f.iso})
	if err != nil {
		return fmt.Errorf("pgxfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var ok bool
	switch err = tx.QueryRow(ctx, f.st.Fence, resource, fence, owner).Scan(&ok); {
	case errors.Is(err, pgx.ErrNoRows):
		return fencesql.Stale(resource, n)
	case err != nil:
		return fmt.Errorf("pgxfence: fence %q: %w", resource, err)
	}
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgxfence: commit: %w", err)
	}
	return nil
}

// Fence returns the largest fence recorded for resource (0 if none). It
// needs a db with QueryRow (a *pgx.Conn or *pgxpool.Pool).
func (f *Fencer) Fence(ctx context.Context, resource string) (uint64, error) {
	if f.read == nil {
		return 0, errors.New("pgxfence: Fence needs a database with QueryRow")
	}
	var s sql.NullString
	err := f.read(ctx, f.st.Read, resource).Scan(&s)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("pgxfence: read fence %q: %w", resource, err)
	}
	return fencesql.ParseFence(s)
}
