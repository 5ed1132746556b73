package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A kept lock: Keep extends it in the background, and Done closes, with
// Err ErrLost, by its deadline once it cannot be extended. Here five local
// redis-server masters (package lab) stand in for real ones, so that the
// example can stall them: leadership survives two of five stalled, and is
// given up by the deadline when a third stalls.
func ExampleLock_Keep() {
	ctx := context.Background()
	masters, err := lab.Start(ctx, 5, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer masters.Close()
	locker, err := redlock.New(masters.Clients(), &redlock.Options{TTL: time.Second, MasterTimeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	leader, err := locker.Lock(ctx, "leader") // waits while another candidate leads
	if err != nil {
		log.Fatal(err)
	}
	if err := leader.Keep(); err != nil {
		log.Fatal(err) // released meanwhile (a Shutdown)
	}
	fmt.Println("leading")
	lead := func(d time.Duration) {
		select {
		case <-leader.Done(): // stop acting as the leader at once
			fmt.Println("stepped down:", leader.Err())
		case <-time.After(d): // leader's work, with leader.Context()
			fmt.Println("still leading")
		}
	}

	masters.Pause(0)
	masters.Pause(1)
	lead(3 * time.Second) // 3 TTLs with 2 of 5 masters stalled

	masters.Pause(2)
	lead(time.Minute) // a majority stalled: no extension can succeed

	masters.ResumeAll()
	err = leader.Unlock(ctx)
	fmt.Println("unlock after the loss reports it:", errors.Is(err, redlock.ErrLost))
	// Output:
	// leading
	// still leading
	// stepped down: redlock: lock lost
	// unlock after the loss reports it: true
}
