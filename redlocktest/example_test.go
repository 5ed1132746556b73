package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// Five in-process masters, a Locker over them, and what happens when two,
// then three, stop answering. In a test, redlocktest.New(t, nil) replaces
// Start and Close.
func Example() {
	masters, err := redlocktest.Start(nil) // five masters
	if err != nil {
		log.Fatal(err)
	}
	defer masters.Close()
	// A MasterTimeout generous enough for the first round's connections on a
	// busy machine; the default (50ms at TTL 10s) suits real masters.
	locker, err := masters.Locker(&redlock.Options{MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("invoice:42 held on %d of %d masters\n", masters.Holding(locker, lock), masters.N())
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// Masters 3 and 4 stop answering: a majority (3) still does.
	if err := masters.Stall(3, 4); err != nil {
		log.Fatal(err)
	}
	lock, err = locker.TryLock(ctx, "invoice:43")
	if err != nil {
		log.Fatal(err)
	}
	var where []bool
	for _, t := range masters.Tokens(locker, "invoice:43") {
		where = append(where, t == lock.Token())
	}
	fmt.Println("invoice:43 held on masters", where)
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	// Master 2 too: no majority is possible.
	if err := masters.Stall(2); err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryLock(ctx, "invoice:44")
	var e *redlock.Error
	if errors.As(err, &e) {
		fmt.Printf("invoice:44: not acquired: %v, %d of %d masters granted it, %d needed\n",
			errors.Is(err, redlock.ErrNotAcquired), e.Count(quorum.OK), len(e.Masters), e.Need)
	}
	// Output:
	// invoice:42 held on 5 of 5 masters
	// invoice:43 held on masters [true true true false false]
	// invoice:44: not acquired: true, 2 of 5 masters granted it, 3 needed
}

// The quick start of the project's README, runnable without Redis: the
// same code, given five in-process masters instead of real ones.
func Example_quickStart() {
	m, err := redlocktest.Start(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	quickStart := func(ctx context.Context, masters []redis.UniversalClient) error {
		// From here to the Printf, the README's quick start (gofmt'd).
		locker, err := redlock.New(masters, nil) // []redis.UniversalClient: 5 independent masters; TTL 10s
		if err != nil {
			return err
		}
		defer locker.Close()

		lock, err := locker.Lock(ctx, "invoice:42") // retries with jittered backoff until ctx ends
		if err != nil {
			return err
		} // errors.Is(err, redlock.ErrNotAcquired) / context.Canceled
		defer lock.Unlock(ctx)
		// The lock is yours until lock.Deadline() = start + TTL − drift − margin; not a moment longer.
		a := lock.Acquisition() // Elapsed, Drift, Validity, and each master's outcome and latency

		fmt.Printf("held %s on a majority: %v; TTL %v, drift %v, validity left ≤ TTL − drift: %v; valid now: %v\n",
			lock.Resource(), m.Holding(locker, lock) >= 3, a.TTL, a.Drift, a.Validity <= a.TTL-a.Drift, lock.Valid())
		return nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := quickStart(ctx, m.Clients()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// held invoice:42 on a majority: true; TTL 10s, drift 102ms, validity left ≤ TTL − drift: true; valid now: true
}
