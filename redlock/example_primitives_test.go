package redlock_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// fiveMasters is the compose lab's masters (make lab-up).
func fiveMasters() []redis.UniversalClient {
	var masters []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		masters = append(masters, redis.NewClient(&redis.Options{Addr: addr}))
	}
	return masters
}

// A tenant runs at most 3 exports at once, across every process: each
// export holds one of the tenant's 3 permits while it runs, kept alive in
// the background, and waits for a permit when all 3 are taken.
func ExampleLocker_Semaphore() {
	masters := fiveMasters()
	for _, m := range masters {
		defer m.Close()
	}
	locker, err := redlock.New(masters, &redlock.Options{TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	exports, err := locker.Semaphore("exports:tenant-17", 3) // every process names 3
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	permit, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err) // no permit within a minute
	}
	if err := permit.Keep(); err != nil { // extends the permit until Unlock
		log.Fatal(err)
	}
	defer permit.Unlock(context.Background())
	runExport(permit.Context()) // cancelled if the permit is lost
}

// A cache refreshed by one writer and read by many: readers share the
// read lock; the refresher takes the write lock, which stops new readers
// and waits for those inside to leave. Its fence goes with the write, so
// the store can refuse a refresher whose lock has moved on.
func ExampleLocker_RWMutex() {
	masters := fiveMasters()
	for _, m := range masters {
		defer m.Close()
	}
	locker, err := redlock.New(masters, &redlock.Options{TTL: 10 * time.Second, Fencing: true})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	prices, err := locker.RWMutex("prices")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// A reader.
	if r, err := prices.RLock(ctx); err == nil {
		readPrices(ctx)
		r.Unlock(ctx)
	}

	// The refresher.
	w, err := prices.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Unlock(ctx)
	refreshPrices(ctx, w.Fence())
}

func runExport(context.Context)             {}
func readPrices(context.Context)            {}
func refreshPrices(context.Context, uint64) {}
