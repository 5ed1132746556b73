package world_test

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

// iv is a section of client c on resource "r" from enter to exit (ms),
// with a deadline well after.
func iv(c int, mode world.Mode, enter, exit time.Duration) world.Interval {
	return world.Interval{Client: c, Call: 1, Resource: "r", Mode: mode, Enter: enter * ms, Exit: exit * ms,
		Deadline: (exit + 100) * ms, Done: world.Never}
}

func wantViolations(t *testing.T, vs []world.Violation, n int, check string) {
	t.Helper()
	if len(vs) != n {
		t.Fatalf("%d violations, want %d: %v", len(vs), n, vs)
	}
	for _, v := range vs {
		if v.Check != check {
			t.Errorf("violation of %q, want %q: %v", v.Check, check, v)
		}
	}
}

func TestExclusionMutex(t *testing.T) {
	other := iv(3, world.Exclusive, 5, 15)
	other.Resource = "s"
	late := iv(2, world.Exclusive, 0, 30)
	late.Deadline = 20 * ms // it stops counting on the lock at 20
	for _, tc := range []struct {
		name string
		ivs  []world.Interval
		n    int
	}{
		{"overlap", []world.Interval{iv(0, world.Exclusive, 0, 10), iv(1, world.Exclusive, 5, 15)}, 1},
		{"one inside another", []world.Interval{iv(0, world.Exclusive, 0, 30), iv(1, world.Exclusive, 5, 15)}, 1},
		{"back to back", []world.Interval{iv(0, world.Exclusive, 0, 10), iv(1, world.Exclusive, 10, 15)}, 0},
		{"another resource", []world.Interval{iv(0, world.Exclusive, 0, 10), other}, 0},
		{"after the first's deadline", []world.Interval{late, iv(1, world.Exclusive, 20, 25)}, 0},
		{"before the first's deadline", []world.Interval{late, iv(1, world.Exclusive, 19, 25)}, 1},
		{"three at once", []world.Interval{iv(0, world.Exclusive, 0, 10), iv(1, world.Exclusive, 1, 10), iv(2, world.Exclusive, 2, 10)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := world.Exclusion(tc.ivs, 0)
			wantViolations(t, vs, tc.n, "exclusion")
			if tc.n > 0 && !strings.Contains(vs[0].What, "client 1") {
				t.Errorf("the violation names not the second holder: %v", vs[0])
			}
		})
	}
}

func TestExclusionSemaphore(t *testing.T) {
	three := []world.Interval{iv(0, world.Permit, 0, 10), iv(1, world.Permit, 2, 10), iv(2, world.Permit, 4, 10)}
	wantViolations(t, world.Exclusion(three, 2), 1, "exclusion")
	wantViolations(t, world.Exclusion(three, 3), 0, "exclusion")
	// The first leaves as the third enters: two at a time.
	three[0].Exit = 4 * ms
	wantViolations(t, world.Exclusion(three, 2), 0, "exclusion")
}

func TestExclusionReadWrite(t *testing.T) {
	readers := []world.Interval{iv(0, world.Shared, 0, 10), iv(1, world.Shared, 2, 10), iv(2, world.Shared, 4, 10)}
	wantViolations(t, world.Exclusion(readers, 0), 0, "exclusion")
	wantViolations(t, world.Exclusion(append(readers, iv(3, world.Exclusive, 8, 12)), 0), 1, "exclusion")
	wantViolations(t, world.Exclusion(append(readers, iv(3, world.Exclusive, 10, 12)), 0), 0, "exclusion")
	// A reader entering under a writer.
	wantViolations(t, world.Exclusion([]world.Interval{iv(3, world.Exclusive, 0, 12), iv(0, world.Shared, 5, 6)}, 0), 1, "exclusion")
}

func fenced(c int, mode world.Mode, enter, exit time.Duration, fence uint64) world.Interval {
	v := iv(c, mode, enter, exit)
	v.Fence = fence
	return v
}

func TestFences(t *testing.T) {
	for _, tc := range []struct {
		name string
		ivs  []world.Interval
		n    int
	}{
		{"increasing", []world.Interval{fenced(0, world.Exclusive, 0, 10, 1), fenced(1, world.Exclusive, 10, 20, 2), fenced(2, world.Exclusive, 25, 30, 7)}, 0},
		{"repeated", []world.Interval{fenced(0, world.Exclusive, 0, 10, 1), fenced(1, world.Exclusive, 10, 20, 2), fenced(2, world.Exclusive, 25, 30, 2)}, 1},
		{"back", []world.Interval{fenced(0, world.Exclusive, 0, 10, 5), fenced(1, world.Exclusive, 10, 20, 4)}, 1},
		{"back past a gap", []world.Interval{fenced(0, world.Exclusive, 0, 10, 5), fenced(1, world.Exclusive, 10, 20, 6), fenced(2, world.Exclusive, 30, 40, 5)}, 1},
		{"readers at once share one", []world.Interval{fenced(0, world.Shared, 0, 10, 3), fenced(1, world.Shared, 2, 12, 3), fenced(2, world.Exclusive, 12, 20, 4)}, 0},
		{"a writer after readers, not above them", []world.Interval{fenced(0, world.Shared, 0, 10, 3), fenced(1, world.Shared, 2, 12, 3), fenced(2, world.Exclusive, 12, 20, 3)}, 1},
		{"two writers at once, the later lower", []world.Interval{fenced(0, world.Exclusive, 0, 10, 5), fenced(1, world.Exclusive, 5, 20, 4)}, 1},
		{"two writers at once, the later higher", []world.Interval{fenced(0, world.Exclusive, 0, 10, 5), fenced(1, world.Exclusive, 5, 20, 6)}, 0},
		{"readers at once, the later lower", []world.Interval{fenced(0, world.Shared, 0, 10, 5), fenced(1, world.Shared, 5, 20, 4)}, 0},
		{"unfenced left out", []world.Interval{fenced(0, world.Exclusive, 0, 10, 5), iv(1, world.Exclusive, 10, 20)}, 0},
		// A section that ends where it enters is no earlier holder of its
		// own (found by make sim, row fenced, seed 6368), but is one of
		// the holders after it.
		{"a section of no length", []world.Interval{fenced(0, world.Exclusive, 0, 10, 1), fenced(1, world.Exclusive, 10, 10, 2), fenced(2, world.Exclusive, 10, 20, 3)}, 0},
		{"after a section of no length, lower", []world.Interval{fenced(0, world.Exclusive, 0, 10, 1), fenced(1, world.Exclusive, 10, 10, 3), fenced(2, world.Exclusive, 10, 20, 2)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { wantViolations(t, world.Fences(tc.ivs), tc.n, "fence") })
	}
	// Another resource has fences of its own.
	a, b := fenced(0, world.Exclusive, 0, 10, 5), fenced(1, world.Exclusive, 10, 20, 1)
	b.Resource = "s"
	wantViolations(t, world.Fences([]world.Interval{a, b}), 0, "fence")
}

func TestDoneByDeadline(t *testing.T) {
	in := iv(0, world.Exclusive, 0, 10) // left before its deadline
	past := iv(1, world.Exclusive, 0, 10)
	past.Deadline = 5 * ms // still in at its deadline, never told
	told := past
	told.Done = 5 * ms // told at the deadline
	lateTold := past
	lateTold.Done = 6 * ms
	extended := past
	extended.Deadline = 50 * ms
	for _, tc := range []struct {
		name string
		iv   world.Interval
		n    int
	}{
		{"left in time", in, 0},
		{"past the deadline, Done open", past, 1},
		{"Done closed at the deadline", told, 0},
		{"Done closed late", lateTold, 1},
		{"extended", extended, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { wantViolations(t, world.DoneByDeadline([]world.Interval{tc.iv}), tc.n, "done") })
	}
}

func TestLiveness(t *testing.T) {
	const window, bound = 50 * ms, 100 * ms
	call := func(start, end time.Duration, ok bool) world.Call {
		return world.Call{Client: 0, Call: 1, Resource: "r", Start: start * ms, End: end * ms, Acquired: ok, Limit: world.Never}
	}
	down := func(client, master int, from, to time.Duration) world.Outage {
		return world.Outage{Client: client, Master: master, From: from * ms, To: to * ms}
	}
	open := call(200, 0, false)
	open.End = world.Never
	limited := call(200, 230, false)
	limited.Limit = 230 * ms
	late := call(950, 0, false) // still waiting at the history's end
	late.End = world.Never
	for _, tc := range []struct {
		name    string
		call    world.Call
		outages []world.Outage
		n       int
	}{
		{"acquired in time", call(200, 250, true), nil, 0},
		{"failed under a stable majority", call(200, 230, false), nil, 1},
		{"acquired too late", call(200, 310, true), nil, 1},
		{"never returned", open, nil, 1},
		{"a minority down", call(200, 230, false), []world.Outage{down(-1, 0, 100, 400)}, 1},
		{"a majority down", call(200, 230, false), []world.Outage{down(-1, 0, 100, 400), down(-1, 1, 220, 400)}, 0},
		{"a majority down after the call returned", call(200, 230, false), []world.Outage{down(-1, 0, 100, 400), down(-1, 1, 290, 400)}, 1},
		{"a majority down after the bound", open, []world.Outage{down(-1, 0, 100, 400), down(-1, 1, 310, 400)}, 1},
		{"a majority down before the bound", open, []world.Outage{down(-1, 0, 100, 400), down(-1, 1, 290, 400)}, 0},
		{"the client cut from a majority", call(200, 230, false), []world.Outage{down(0, 0, 100, 400), down(0, 2, 100, 400)}, 0},
		{"another client cut", call(200, 230, false), []world.Outage{down(5, 0, 100, 400), down(5, 2, 100, 400)}, 1},
		{"an outage over before the window", call(200, 230, false), []world.Outage{down(-1, 0, 0, 140), down(-1, 1, 0, 149)}, 1},
		{"an outage in the window", call(200, 230, false), []world.Outage{down(-1, 0, 0, 150), down(-1, 1, 0, 150)}, 0},
		{"the client paused", call(200, 230, false), []world.Outage{down(0, -1, 210, 220)}, 0},
		{"the client paused after the call", call(200, 230, false), []world.Outage{down(0, -1, 250, 260)}, 1},
		{"another client paused", call(200, 230, false), []world.Outage{down(4, -1, 210, 220)}, 1},
		{"its context allowed less", limited, nil, 0},
		{"too near the end to judge", late, nil, 0},
		{"failed near the end", call(950, 960, false), nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := world.History{Masters: 3, Calls: []world.Call{tc.call}, Outages: tc.outages, End: time.Second}
			wantViolations(t, world.Liveness(h, window, bound), tc.n, "liveness")
		})
	}
}

func TestLeftovers(t *testing.T) {
	w, err := world.New(world.Options{Seed: 1, Masters: 3})
	if err != nil {
		t.Fatal(err)
	}
	w.Master(1).Do(w.MasterNow(1), []string{"SET", "{r}", "tok", "PX", "10"})
	w.Master(2).Do(w.MasterNow(2), []string{"ZADD", "{r}:waiters", "1", "L1.1"})
	w.Master(2).Do(w.MasterNow(2), []string{"INCR", "{r}:fence"})
	vs := world.Leftovers(w, nil)
	wantViolations(t, vs, 3, "leftover")
	fence := func(k string) bool { return strings.HasSuffix(k, ":fence") }
	wantViolations(t, world.Leftovers(w, fence), 2, "leftover")
	// The lock key expires; the queue member does not.
	w.Run(20 * ms)
	vs = world.Leftovers(w, fence)
	wantViolations(t, vs, 1, "leftover")
	if !strings.Contains(vs[0].What, "waiters") {
		t.Fatalf("left: %v, want the queue", vs[0])
	}
}

func TestFencesAdopted(t *testing.T) {
	first, adopted, other := iv(0, world.Exclusive, 0, 10), iv(1, world.Exclusive, 12, 20), iv(2, world.Exclusive, 12, 20)
	first.Fence, adopted.Fence, other.Fence = 5, 5, 5
	first.Lineage, adopted.Lineage = 7, 7
	wantViolations(t, world.Fences([]world.Interval{first, adopted}), 0, "fence")
	wantViolations(t, world.Fences([]world.Interval{first, other}), 1, "fence") // no lineage: the same fence again
	adopted.Fence = 4
	wantViolations(t, world.Fences([]world.Interval{first, adopted}), 1, "fence") // an adopted lock's fence went back
}

// obs is client c's reading of mode on "r" from start to end (ms).
func obs(c int, observer uint64, mode world.Mode, start, end time.Duration, v uint64) world.Observation {
	return world.Observation{Client: c, Observer: observer, Resource: "r", Mode: mode, Start: start * ms, End: end * ms, Value: v}
}

func TestTerms(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  []world.Observation
		n    int
	}{
		{"increasing", []world.Observation{obs(0, 1, world.Exclusive, 0, 1, 3), obs(1, 1, world.Exclusive, 2, 3, 4)}, 0},
		{"overlapping readings may disagree", []world.Observation{obs(0, 1, world.Exclusive, 0, 5, 4), obs(1, 1, world.Exclusive, 2, 6, 3)}, 0},
		{"a later reading older", []world.Observation{obs(0, 1, world.Exclusive, 0, 1, 4), obs(1, 1, world.Exclusive, 2, 3, 3)}, 1},
		{"an observer going back", []world.Observation{obs(0, 1, world.Exclusive, 0, 5, 4), obs(0, 1, world.Exclusive, 2, 6, 3)}, 1},
		{"holders are not terms", []world.Observation{obs(0, 1, world.Permit, 0, 1, 4), obs(1, 1, world.Permit, 2, 3, 3)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &world.History{Observations: tc.obs}
			wantViolations(t, world.Terms(h), tc.n, "terms")
		})
	}
}

func TestHolders(t *testing.T) {
	held := iv(0, world.Permit, 0, 20)
	call := world.Call{Client: 0, Call: 1, Resource: "r", Start: 0, End: 0, Acquired: true, Limit: world.Never}
	yes := func(world.Observation) bool { return true }
	later := iv(0, world.Permit, 10, 30)
	lost := []world.Outage{{Client: -1, Master: 2, From: 3 * ms, To: 5 * ms}}
	for _, tc := range []struct {
		name    string
		h       world.History
		reprobe time.Duration
		judge   func(world.Observation) bool
		n       int
	}{
		{"counts the holder", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 5, 6, 1)}}, 0, yes, 0},
		{"misses the holder", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 5, 6, 0)}}, 0, yes, 1},
		{"misses it, not judged", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 5, 6, 0)}},
			0, func(world.Observation) bool { return false }, 0},
		{"misses it under an outage", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 5, 6, 0)},
			Outages: []world.Outage{{Client: -1, Master: 2, From: 1 * ms, To: 2 * ms}}}, 0, yes, 0},
		{"counts one nobody may hold", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 5, 6, 2)}}, 0, yes, 1},
		{"counts one whose keys may stand", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 25, 26, 1)}}, 0, yes, 0},
		{"counts one whose keys are gone", world.History{Intervals: []world.Interval{held}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 40, 41, 1)}}, 0, yes, 1},
		// An outage over before the holder entered: judged, unless the reader
		// may still skip that master (within reprobe of the reading).
		{"misses it after an outage", world.History{Intervals: []world.Interval{later}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 15, 16, 0)}, Outages: lost}, 0, yes, 1},
		{"misses it while the reader may skip a master", world.History{Intervals: []world.Interval{later}, Calls: []world.Call{call}, Observations: []world.Observation{obs(1, 1, world.Permit, 15, 16, 0)}, Outages: lost}, 20 * ms, yes, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantViolations(t, world.Holders(&tc.h, 10*ms, tc.reprobe, tc.judge), tc.n, "holders")
		})
	}
}

func TestClosings(t *testing.T) {
	h := &world.History{Closings: []world.Closing{{Client: 0, At: ms}, {Client: 1, At: ms, Running: []uint64{4}}, {Client: 2, At: ms, Shutdown: true, SentAfter: 2, FirstAfter: 2 * ms}}}
	wantViolations(t, world.Closings(h), 2, "closing")
}

func TestKept(t *testing.T) {
	const rtt = 10 * ms
	loss := world.Loss{Client: 0, Call: 1, From: 100 * ms, At: 200 * ms, Spare: 2 * rtt, On: []int{0, 1, 2}, What: "lost"}
	down := func(master int, from, to time.Duration) world.Outage {
		return world.Outage{Client: -1, Master: master, From: from * ms, To: to * ms}
	}
	short, reader := loss, loss
	short.Spare = 2*rtt - 1
	reader.On = nil
	for _, tc := range []struct {
		name    string
		l       world.Loss
		outages []world.Outage
		n       int
	}{
		{"a majority holding it stable", loss, nil, 1},
		{"one of three holders down", loss, []world.Outage{down(1, 150, 160)}, 0},
		{"a holder down before the keeping", loss, []world.Outage{down(1, 50, 90)}, 1},
		{"a master not holding it down", loss, []world.Outage{down(4, 150, 160)}, 1},
		{"kept with under two round trips to spare", short, nil, 0},
		{"held on no master's key", reader, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := world.History{Masters: 5, End: time.Second, Outages: tc.outages}
			wantViolations(t, world.Kept(&h, []world.Loss{tc.l}, rtt), tc.n, "kept")
		})
	}
}
