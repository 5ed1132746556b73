package world_test

import (
	"fmt"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
)

// setter sets a key with PX on every master and reads it back once its
// timer fires: a client as the world drives it, one event in, actions
// out.
type setter struct {
	masters int
	out     []world.Action
}

func (s *setter) Start(time.Duration) []world.Action {
	s.out = s.out[:0]
	for m := range s.masters {
		s.out = append(s.out, world.Action{Kind: world.Send, Master: m, Tag: 1, Args: []string{"SET", "k", "v", "PX", "100"}})
	}
	return append(s.out, world.Action{Kind: world.After, Tag: 7, Delay: 120 * time.Millisecond})
}

func (s *setter) Reply(_ time.Duration, m int, tag uint64, r sim.Reply) []world.Action {
	fmt.Printf("master %d, command %d: %v\n", m, tag, r)
	return nil
}

func (s *setter) Timer(_ time.Duration, id uint64) []world.Action {
	s.out = s.out[:0]
	for m := range s.masters {
		s.out = append(s.out, world.Action{Kind: world.Send, Master: m, Tag: 2, Args: []string{"GET", "k"}})
	}
	return s.out
}

func (s *setter) Lost(time.Duration, int, uint64) []world.Action             { return nil }
func (s *setter) Message(time.Duration, int, string, string) []world.Action  { return nil }
func (s *setter) Subscribed(time.Duration, int, string, bool) []world.Action { return nil }
func (s *setter) Resubscribe(time.Duration, int) []world.Action              { return nil }
func (s *setter) Stop(time.Duration) []world.Action                          { return nil }

// A world of two masters and one client. Master 1 stalls for its first
// 50 ms: the SET runs there when the stall ends, so at 120 ms the key has
// expired on master 0 (set at about 0) but not on master 1 (set at about
// 50 ms). The lines come in the order of the events on the global clock.
func Example() {
	w, err := world.New(world.Options{Seed: 1, Masters: 2})
	if err != nil {
		panic(err)
	}
	w.Add(&setter{masters: 2})
	if err := w.Inject(world.Fault{Kind: world.StallMaster, Master: 1, For: 50 * time.Millisecond}); err != nil {
		panic(err)
	}
	w.Drain(1000)
	fmt.Println("idle at", w.Now().Round(time.Millisecond))
	// Output:
	// master 0, command 1: +OK
	// master 1, command 1: +OK
	// master 1, command 2: "v"
	// master 0, command 2: (nil)
	// idle at 120ms
}
