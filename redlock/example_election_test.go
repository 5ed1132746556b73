package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// One scheduler leads, the others observe and take over. Three schedulers,
// each with a Locker of its own, campaign in the election "scheduler" on
// five local redis-server masters (package lab stands in for real ones).
// The leader publishes its address; the others Observe it while they
// wait in Campaign. When the leader resigns, one of them takes over at
// once with a larger term; when that one's process stops (its Locker
// closes without releasing), the last takes over after its deadline.
func ExampleLocker_Election() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	masters, err := lab.Start(ctx, 5, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer masters.Close()

	type scheduler struct {
		addr     string
		locker   *redlock.Locker
		election *redlock.Election
		observed <-chan redlock.Leader
	}
	schedulers := map[string]*scheduler{}
	for _, addr := range []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"} {
		// Terms are fences: an election needs Fencing.
		l, err := redlock.New(masters.Clients(), &redlock.Options{Fencing: true, TTL: 2 * time.Second, MasterTimeout: 100 * time.Millisecond})
		if err != nil {
			log.Fatal(err)
		}
		defer l.Close()
		e, err := l.Election("scheduler")
		if err != nil {
			log.Fatal(err)
		}
		schedulers[addr] = &scheduler{addr: addr, locker: l, election: e}
	}

	// The first scheduler campaigns alone, and leads.
	first := schedulers["10.0.0.1:7000"]
	lead, err := first.election.Campaign(ctx, first.addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading:", first.addr)

	// The others observe the leader, and campaign: they wait.
	type led struct {
		s    *scheduler
		lead *redlock.Lock
	}
	leads := make(chan led)
	for _, addr := range []string{"10.0.0.2:7000", "10.0.0.3:7000"} {
		s := schedulers[addr]
		s.observed = s.election.Observe(ctx)
		fmt.Printf("%s observes the leader %s\n", addr, (<-s.observed).Value)
		go func() {
			lead, err := s.election.Campaign(ctx, s.addr)
			if err != nil {
				log.Fatal(err)
			}
			leads <- led{s, lead}
		}()
	}

	// The leader resigns: its release wakes a waiting campaigner.
	if err := first.election.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	second := <-leads
	fmt.Println("another scheduler leads:", second.s != first)
	fmt.Println("term grew:", second.lead.Fence() > lead.Fence())
	seen := true
	for _, addr := range []string{"10.0.0.2:7000", "10.0.0.3:7000"} {
		seen = seen && (<-schedulers[addr].observed).Value == second.s.addr
	}
	fmt.Println("both observers see it:", seen)

	// The second leader's process stops: nothing extends or releases its
	// keys. The last scheduler leads once they have expired.
	deadline := second.lead.Deadline()
	second.s.locker.Close()
	third := <-leads
	fmt.Println("the last scheduler leads after the old deadline:", time.Now().After(deadline))
	fmt.Println("term grew:", third.lead.Fence() > second.lead.Fence())
	fmt.Println("its observer sees it:", (<-third.s.observed).Value == third.s.addr)
	if err := third.s.election.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// leading: 10.0.0.1:7000
	// 10.0.0.2:7000 observes the leader 10.0.0.1:7000
	// 10.0.0.3:7000 observes the leader 10.0.0.1:7000
	// another scheduler leads: true
	// term grew: true
	// both observers see it: true
	// the last scheduler leads after the old deadline: true
	// term grew: true
	// its observer sees it: true
}
