package redlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
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
