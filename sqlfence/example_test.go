package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
	"github.com/quorumlab/redlock/sqlfence"
)

// A holder's UPDATE commits only while its fence is the largest the
// invoice has seen; a holder whose lock was taken over since is rejected.
// (Here the masters are in-process and the database is the tests'
// throwaway PostgreSQL; the example does not run without one.)
func Example() {
	ctx := context.Background()
	masters, err := redlocktest.Start(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer masters.Close()
	locker, err := masters.Locker(&redlock.Options{Fencing: true})
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", server.DSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (id int PRIMARY KEY, status text)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO invoices VALUES (42, 'open')`); err != nil {
		log.Fatal(err)
	}
	fencer, err := sqlfence.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := fencer.CreateTable(ctx); err != nil { // once, as a migration
		log.Fatal(err)
	}

	pay := func(lock *redlock.Lock, status string) error {
		return fencer.Do(ctx, "invoice:42", lock, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE invoices SET status = $1 WHERE id = 42`, status)
			return err
		})
	}

	first, err := locker.Lock(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	// The first holder stalls; its lock is lost (released here, as
	// expiry would) and a second holder takes it and writes.
	first.Unlock(ctx)
	second, err := locker.Lock(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	fmt.Println("second:", pay(second, "paid by the second holder"))
	// The first wakes up and writes late.
	err = pay(first, "paid by the first holder")
	fmt.Println("first is stale:", errors.Is(err, redlock.ErrStaleFence))

	var status string
	if err := db.QueryRowContext(ctx, `SELECT status FROM invoices WHERE id = 42`).Scan(&status); err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)
	// Output:
	// second: <nil>
	// first is stale: true
	// paid by the second holder
}
