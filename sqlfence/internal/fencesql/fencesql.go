// Package fencesql holds what package sqlfence and package pgxfence share:
// the statements, the checks of a call's arguments and the rule for which
// errors are worth another transaction.
package fencesql

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quorumlab/redlock/redlock"
)

// DefaultTable is the fence table's name when Options.Table is empty.
const DefaultTable = "redlock_fences"

// Statements are the SQL one table needs, its name quoted.
type Statements struct {
	Table  string // the name as given (for messages)
	Create string // CREATE TABLE IF NOT EXISTS
	Fence  string // the fenced upsert: $1 resource, $2 fence (decimal text), $3 owner
	Read   string // the fence a resource holds: $1 resource
}

// New returns the statements for table ("" is DefaultTable). A name with
// dots is a schema-qualified name; each part is quoted as an identifier.
func New(table string) (Statements, error) {
	if table == "" {
		table = DefaultTable
	}
	parts := strings.Split(table, ".")
	for i, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return Statements{}, fmt.Errorf("sqlfence: bad table name %q", table)
		}
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	q := strings.Join(parts, ".")
	return Statements{
		Table: table,
		Create: `CREATE TABLE IF NOT EXISTS ` + q + ` (
	resource text PRIMARY KEY,
	fence    numeric(20, 0) NOT NULL CHECK (fence > 0),
	owner    text NOT NULL
)`,
		Fence: `INSERT INTO ` + q + ` AS f (resource, fence, owner)
VALUES ($1, $2::text::numeric, $3)
ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, owner = EXCLUDED.owner
WHERE f.fence < EXCLUDED.fence OR (f.fence = EXCLUDED.fence AND f.owner = EXCLUDED.owner)
RETURNING true`,
		Read: `SELECT fence::text FROM ` + q + ` WHERE resource = $1`,
	}, nil
}

// Holder is what a fenced write needs of a lock: *redlock.Lock has both.
type Holder interface {
	Fence() uint64
	Token() string
}

// Args checks a call's arguments and returns the fence as decimal text and
// the owner as stored: the hex SHA-256 of the token, as redlock.WriteFenced
// stores it.
func Args(resource string, h Holder) (fence, owner string, err error) {
	switch {
	case resource == "":
		return "", "", errors.New("sqlfence: resource is empty")
	case h == nil:
		return "", "", errors.New("sqlfence: nil holder")
	case h.Fence() == 0:
		return "", "", errors.New("sqlfence: fence is 0 (Options.Fencing is off, or no lock was taken)")
	case h.Token() == "":
		return "", "", errors.New("sqlfence: token is empty")
	}
	sum := sha256.Sum256([]byte(h.Token()))
	return strconv.FormatUint(h.Fence(), 10), hex.EncodeToString(sum[:]), nil
}

// Stale is the error of a rejected write.
func Stale(resource string, fence uint64) error {
	return fmt.Errorf("%w (resource %q, fence %d)", redlock.ErrStaleFence, resource, fence)
}

// ParseFence reads a fence column read as text; no value is fence 0.
func ParseFence(s sql.NullString) (uint64, error) {
	if !s.Valid {
		return 0, nil
	}
	f, err := strconv.ParseUint(s.String, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sqlfence: bad fence %q: %w", s.String, err)
	}
	return f, nil
}

// Retryable reports whether err (anywhere in its chain) is a PostgreSQL
// serialization failure (40001) or deadlock (40P01): the transaction was
// rolled back and a new one may succeed. The drivers' error types (pgx's
// *pgconn.PgError, lib/pq's *pq.Error) have SQLState.
func Retryable(err error) bool {
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return false
	}
	s := e.SQLState()
	return s == "40001" || s == "40P01"
}

// DefaultMaxAttempts is how many transactions a call starts at most when
// Options.MaxAttempts is 0.
const DefaultMaxAttempts = 10
