package redlock_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// Five independent masters, e.g. the compose lab (make lab-up).
func Example() {
	var masters []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	locker, err := redlock.New(masters, nil) // TTL 10s, drift 1% + 2ms
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Lock(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	a := lock.Acquisition()
	fmt.Printf("held until %v: %v validity left after %v (drift %v)\n",
		lock.Deadline().Format("15:04:05.000"), a.Validity, a.Elapsed, a.Drift)
}

// Single-flight cache rebuild. Of the processes that miss the cache at
// once, one rebuilds the entry; the others do not wait for it and serve
// what they have. Two rebuilds at once would only waste work, so this is
// an efficiency lock: no fencing.
func ExampleLocker_TryLock() {
	var masters []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	locker, err := redlock.New(masters, &redlock.Options{TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	cache := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // the cache, not a lock master
	defer cache.Close()
	buildReport := func(ctx context.Context) (string, error) { return "…", nil }

	ctx := context.Background()
	lock, err := locker.TryLock(ctx, "rebuild:report:2024-06")
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		return // someone else is rebuilding: serve the stale entry, or none
	case err != nil:
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)

	report, err := buildReport(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if !lock.Valid() {
		// The rebuild outlived the lock: another process may be rebuilding
		// too. Harmless here; say so in the logs.
		log.Printf("rebuild took past the lock's deadline %v", lock.Deadline())
	}
	if err := cache.Set(ctx, "report:2024-06", report, time.Hour).Err(); err != nil {
		log.Fatal(err)
	}
}

// A singleton cron job. Every replica of a service wakes up on the same
// tick; the one that gets the lock runs the job while the lock is kept
// alive, the others skip this tick. The lock stops two runs at once; it
// does not record that the job ran, so a replica whose tick comes after
// the first run ended would run it again: keep a "last run" mark where the
// job writes its results, and check it first.
func ExampleLocker_Do() {
	var masters []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	locker, err := redlock.New(masters, &redlock.Options{
		Retry: redlock.RetryPolicy{MaxAttempts: 1}, // one round: whoever loses skips this tick
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	sendInvoices := func(ctx context.Context) error {
		for batch := 0; batch < 100; batch++ {
			if err := ctx.Err(); err != nil {
				return err // the lock is going: stop before the next batch
			}
			// ... send one batch ...
		}
		return nil
	}

	err = locker.Do(context.Background(), "cron:nightly-invoices", func(ctx context.Context) error {
		// ctx is done, with cause redlock.ErrLost, no later than the lock's
		// deadline if the lock could not be extended.
		return sendInvoices(ctx)
	})
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		fmt.Println("another replica runs it")
	case errors.Is(err, redlock.ErrLost):
		fmt.Println("lost the lock mid-run; the next tick resumes")
	case err != nil:
		log.Fatal(err)
	}
}

// Job ownership with a fenced database transition. A worker that holds
// job 42's lock moves the job to "running" and later to "done" in SQL, and
// every statement carries the lock's fence and the digest of its token in
// its WHERE clause (the form WriteFenced's documentation gives). A worker
// that was paused past its deadline, while another worker took the job
// over with a larger fence, then changes nothing.
func ExampleLock_Fence() {
	var masters []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		masters = append(masters, c)
	}
	locker, err := redlock.New(masters, &redlock.Options{Fencing: true})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// Any database/sql driver; PostgreSQL placeholders below. The table:
	// jobs(id BIGINT, state TEXT, fence BIGINT DEFAULT 0, owner TEXT DEFAULT '').
	db, err := sql.Open("pgx", "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = locker.Do(context.Background(), "job:42", func(ctx context.Context) error {
		lock, _ := redlock.FromContext(ctx)
		if lock.Fence() > math.MaxInt64 {
			return errors.New("fence does not fit a BIGINT column")
		}
		fence := int64(lock.Fence())
		sum := sha256.Sum256([]byte(lock.Token())) // store the token's digest, never the token
		owner := hex.EncodeToString(sum[:])

		// Take the job over: from a queued state, or from an earlier holder
		// (a smaller fence) that stopped mid-run.
		res, err := db.ExecContext(ctx, `UPDATE jobs SET state = 'running', fence = $1, owner = $2
			 WHERE id = $3 AND state <> 'done' AND (fence < $1 OR (fence = $1 AND owner = $2))`,
			fence, owner, 42)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("job 42 not claimed (done, or a later holder has it): %w", redlock.ErrStaleFence)
		}

		// ... the work, each write guarded by the same fence and owner ...

		res, err = db.ExecContext(ctx, `UPDATE jobs SET state = 'done'
			 WHERE id = $3 AND fence = $1 AND owner = $2`, fence, owner, 42)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("job 42 taken over before it was done: %w", redlock.ErrStaleFence)
		}
		return nil
	})
	if err != nil {
		log.Print(err)
	}
}
