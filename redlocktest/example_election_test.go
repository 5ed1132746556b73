package redlocktest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// An election on in-process masters: one campaigner leads and publishes
// its address, which Leaders shows on the masters and the other
// campaigner reads; FastForward past the TTL takes the leader's keys away
// (as if it had frozen), its leadership ends, and the other leads with a
// larger term. In a test, redlocktest.New(t, nil) replaces Start and
// Close.
func ExampleMasters_Leaders() {
	masters, err := redlocktest.Start(nil) // five masters
	if err != nil {
		log.Fatal(err)
	}
	defer masters.Close()
	// Terms are fences: an election needs Fencing.
	opts := &redlock.Options{Fencing: true, TTL: 2 * time.Second, MasterTimeout: time.Second}
	a, err := masters.Locker(opts)
	if err != nil {
		log.Fatal(err)
	}
	b, err := masters.Locker(opts)
	if err != nil {
		log.Fatal(err)
	}
	ea, err := a.Election("scheduler")
	if err != nil {
		log.Fatal(err)
	}
	eb, err := b.Election("scheduler")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	first, err := ea.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	on := 0
	for _, l := range masters.Leaders(a, "scheduler") {
		if l.Token == first.Token() && l.Term == first.Fence() {
			on++
		}
	}
	fmt.Println("a leads on a majority:", on >= 3)
	leader, err := eb.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b reads the leader:", leader.Value)

	masters.FastForward(3 * time.Second) // past the TTL: the keys go
	<-first.Done()                       // a's next extension fails
	fmt.Println("a stepped down:", first.Err())

	second, err := eb.Campaign(ctx, "10.0.0.2:8080")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b leads; term grew:", second.Fence() > first.Fence())
	leader, err = ea.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a reads the leader:", leader.Value)
	if err := eb.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a leads on a majority: true
	// b reads the leader: 10.0.0.1:8080
	// a stepped down: redlock: lock lost
	// b leads; term grew: true
	// a reads the leader: 10.0.0.2:8080
}
