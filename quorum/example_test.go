package quorum_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A round over five nodes that needs three: it is decided the moment the
// third yes arrives. A node that was not answering is skipped without being
// asked, a node that has not replied by the decision stays Pending, and a
// reply that comes after Wait returned is late and not counted.
func Example() {
	r, err := quorum.NewRound(5, 3, false, time.Now())
	if err != nil {
		panic(err)
	}
	// In package redlock each master's stream delivers its reply as it is
	// read; here the replies are handed over in turn.
	r.Skip(1, quorum.Unavailable, quorum.ErrUnavailable)
	r.Deliver(0, quorum.Reply{Outcome: quorum.OK})
	r.Deliver(2, quorum.Reply{Outcome: quorum.OK})
	r.Deliver(4, quorum.Reply{Outcome: quorum.OK})

	res := r.Wait(context.Background(), time.Second)
	fmt.Printf("reached: %v (%d of %d needed)\n", res.Reached, res.OK, res.Need)
	for i, rep := range res.Replies {
		fmt.Printf("node %d: %v\n", i, rep.Outcome)
	}
	fmt.Println("late reply counted:", r.Deliver(3, quorum.Reply{Outcome: quorum.OK}))
	// Output:
	// reached: true (3 of 3 needed)
	// node 0: ok
	// node 1: unavailable
	// node 2: ok
	// node 3: pending
	// node 4: ok
	// late reply counted: false
}

// A round that cannot be decided before its deadline: two yes, one no, two
// silent nodes. Wait returns at start + timeout, with one timer for the
// whole round, and the silent nodes become TimedOut.
func ExampleRound_Wait() {
	r, err := quorum.NewRound(5, 3, false, time.Now())
	if err != nil {
		panic(err)
	}
	r.Deliver(0, quorum.Reply{Outcome: quorum.OK})
	r.Deliver(1, quorum.Reply{Outcome: quorum.OK})
	r.Deliver(2, quorum.Reply{Outcome: quorum.Refused, Err: quorum.ErrRefused})

	res := r.Wait(context.Background(), 20*time.Millisecond)
	fmt.Println("reached:", res.Reached)
	fmt.Println("timed out:", res.Count(quorum.TimedOut))
	fmt.Println("node 4:", res.Replies[4].Outcome, "after", res.Replies[4].Latency)
	// Output:
	// reached: false
	// timed out: 2
	// node 4: timed out after 20ms
}
