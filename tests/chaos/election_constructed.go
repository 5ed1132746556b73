package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The election's constructed rows: a fault outside the assumptions built
// step by step, so that two leaders happen every time and the test can
// assert that CheckElection finds them. As in constructed.go, each returns
// a Result whose Notes say what happened; an observer follows throughout.

// handLeader is a leadership recorded by hand.
type handLeader struct {
	client int
	e      *redlock.Election
	lk     *redlock.Lock
	value  string
	seq    int64
	enter  int64
}

// campaignByHand campaigns with value as client and enters the
// leader-section (after Campaign returned and the lock was Valid).
func campaignByHand(tb testing.TB, h *History, e *redlock.Election, client int, value string) *handLeader {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	h.addPublication(Publication{Client: client, Value: value, At: monoNow()})
	lk, err := e.Campaign(ctx, value)
	if err != nil {
		tb.Fatalf("chaos: client %d: Campaign(%q): %v", client, value, err)
	}
	hl := &handLeader{client: client, e: e, lk: lk, value: value, seq: int64(lk.Fence())}
	h.addLeadership(Leadership{Client: client, Seq: hl.seq, Term: lk.Fence(), Value: value, At: monoNow()})
	if !lk.Valid() {
		tb.Fatalf("chaos: client %d: leadership not valid right after Campaign", client)
	}
	hl.enter = monoNow()
	return hl
}

func (hl *handLeader) write(db resourceStore, h *History) Write {
	fencedWrite(db, hl.client, hl.seq, electionName, hl.lk.Fence(), hl.lk.Token(), historySink{h})
	ws := h.Writes()
	return ws[len(ws)-1]
}

// exit ends the leader-section, at the lock's deadline if that came first
// (clip: a leader that checks its deadline), or now whatever the deadline
// (a leader that does not), and resigns.
func (hl *handLeader) exit(h *History, clip bool) {
	now := monoNow()
	dl := deadlineMono(hl.lk)
	exit := now
	if clip {
		exit = min(now, dl)
	}
	h.addSection(Section{Client: hl.client, Seq: hl.seq, Resource: electionName, Enter: hl.enter, Exit: exit, Fence: hl.lk.Fence(), Late: now > dl})
	resign(hl.e)
}

// observeByHand runs an observer (client 100) on its own Locker until the
// returned stop is called; stop waits for it.
func observeByHand(tb testing.TB, c *lab.Masters, opts *redlock.Options, h *History) (stop func()) {
	tb.Helper()
	l := newLocker(tb, c.Clients(), opts)
	ctx, cancel := context.WithCancel(tb.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := runObserver(ctx, l, ClientConfig{ID: 100, Election: electionName}, historySink{h}); err != nil {
			tb.Errorf("chaos: observer: %v", err)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			l.Close()
		})
	}
	tb.Cleanup(stop)
	return stop
}

// awaitDelivery waits (at most 5 s) until the observer was delivered term.
func awaitDelivery(h *History, term uint64) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, d := range h.Deliveries() {
			if d.Term == term {
				return true
			}
		}
	}
	return false
}

func electionOf(tb testing.TB, l *redlock.Locker) *redlock.Election {
	tb.Helper()
	e, err := l.Election(electionName)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func constructedElection(name, faults string, h *History, notes string, wall time.Duration) Result {
	r := Result{Scenario: name, Faults: faults, Wall: wall, FaultsRun: 1, Notes: notes}
	v, ev := CheckElection(h)
	r.Verdict, r.Election = v, &ev
	return r
}

func lastDelivered(h *History) string {
	ds := h.Deliveries()
	if len(ds) == 0 {
		return "nothing"
	}
	d := ds[len(ds)-1]
	return fmt.Sprintf("term %d (%q)", d.Term, d.Value)
}

// ElectionRestartEmpty: 3 masters. Campaigner A leads and resigns three
// terms (raising the fence counters), then leads a fourth; two masters are
// killed and restarted empty at once (no delayed restart); campaigner B
// then leads on those two, a majority, while A is before its deadline, and
// its term comes from wiped counters: lower than A's. The checker must
// find two leaders at once and the term going back; the fenced resource
// rejects B (the legitimate new leader) and keeps accepting A; the
// observer, which follows A, is never delivered B's lower term.
func ElectionRestartEmpty(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c, db, la, lb := twoClientsOnThree(tb)
	h := &History{}
	stop := observeByHand(tb, c, constructedOptions(), h)
	ea, eb := electionOf(tb, la), electionOf(tb, lb)
	for k := range 3 {
		hl := campaignByHand(tb, h, ea, 1, fmt.Sprintf("a-%d", k))
		hl.write(db, h)
		hl.exit(h, true)
	}
	a := campaignByHand(tb, h, ea, 1, "a-3")
	a.write(db, h)
	seenA := awaitDelivery(h, a.lk.Fence())
	for _, i := range []int{0, 1} {
		if err := c.Restart(tb.Context(), i); err != nil {
			tb.Fatal(err)
		}
	}
	b := campaignByHand(tb, h, eb, 2, "b-0")
	both := a.lk.Valid() && b.lk.Valid()
	wb := b.write(db, h) // the new leader, with a term from wiped counters
	wa := a.write(db, h) // the old one, still before its deadline
	// Let the observer read the leader now (it polls every TTL/4) and
	// read it ourselves: the masters report B's lower term.
	time.Sleep(constructedTTL / 2)
	now, err := eb.Leader(tb.Context())
	b.exit(h, true)
	a.exit(h, true)
	stop()
	notes := fmt.Sprintf("both leaders before their deadlines at once: %v; terms %d (A) then %d (B, wiped counters); B's write %s, A's later write %s; the observer was delivered A's term: %v, and last %s; Leader() during B's leadership: term %d (%q), err %v",
		both, a.lk.Fence(), b.lk.Fence(), outcome(wb), outcome(wa), seenA, lastDelivered(h), now.Term, now.Value, err)
	return constructedElection("election: restart empty, no delay (constructed, 3 masters; term goes back)", "2 of 3 masters killed and restarted empty at once", h, notes, time.Since(start))
}

// ElectionClockJump: 3 masters. A leads; a forward jump of TTL (SIMULATED:
// lab.Masters.JumpClock) on two masters expires its keys there; B leads on
// those two while A is before its deadline. The fence counters have no
// TTL, so B's term is larger: the terms still increase, the checker finds
// the two leaders, and the resource rejects A's later write.
func ElectionClockJump(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c, db, la, lb := twoClientsOnThree(tb)
	h := &History{}
	stop := observeByHand(tb, c, constructedOptions(), h)
	a := campaignByHand(tb, h, electionOf(tb, la), 1, "a-0")
	a.write(db, h)
	for _, i := range []int{0, 1} {
		if _, err := c.JumpClock(tb.Context(), i, constructedTTL); err != nil {
			tb.Fatal(err)
		}
	}
	b := campaignByHand(tb, h, electionOf(tb, lb), 2, "b-0")
	both := a.lk.Valid() && b.lk.Valid()
	wb := b.write(db, h)
	wa := a.write(db, h)
	awaitDelivery(h, b.lk.Fence())
	b.exit(h, true)
	a.exit(h, true)
	stop()
	notes := fmt.Sprintf("both leaders before their deadlines at once: %v; terms %d then %d; B's write %s, A's later write %s; the observer was delivered last %s",
		both, a.lk.Fence(), b.lk.Fence(), outcome(wb), outcome(wa), lastDelivered(h))
	return constructedElection("election: clock jump (simulated; constructed, 3 masters)", fmt.Sprintf("forward jump Δ=TTL=%v on 2 of 3 masters", constructedTTL), h, notes, time.Since(start))
}

// ElectionFrozenActs: 3 masters, TTL 1 s. A leads and writes; then it
// freezes (its Locker closes: no extension, no release) past its
// deadline; B leads once A's keys expire, with a larger term, and writes.
// A wakes and acts as leader WITHOUT checking lk.Err() or its deadline:
// its section runs on to now (not clipped), across B's, and it writes
// with its old term. No master fault at all: the leader broke the rule
// the election's guarantee rests on. The checker finds two leaders; the
// resource rejects A's write.
func ElectionFrozenActs(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	const ttl = time.Second
	opts := func() *redlock.Options {
		return &redlock.Options{TTL: ttl, MasterTimeout: 50 * time.Millisecond, Fencing: true,
			Retry: redlock.RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond}}
	}
	c := lab.ForTest(tb, 3, nil)
	db := lab.ForTest(tb, 1, nil).Client(0)
	la := newLocker(tb, c.Clients(), opts())
	tb.Cleanup(func() { la.Close() })
	lb := newLocker(tb, c.Clients(), opts())
	tb.Cleanup(func() { lb.Close() })
	h := &History{}
	stop := observeByHand(tb, c, opts(), h)
	a := campaignByHand(tb, h, electionOf(tb, la), 1, "a-0")
	a.write(db, h)
	deadline := a.lk.Deadline()
	la.Close() // frozen: its keeper stops, nothing is released
	b := campaignByHand(tb, h, electionOf(tb, lb), 2, "b-0")
	after := time.Now().After(deadline)
	wb := b.write(db, h)
	// A wakes: it does not look at Done, Err or its deadline.
	wa := a.write(db, h)
	past := time.Since(deadline)
	awaitDelivery(h, b.lk.Fence())
	b.exit(h, true)
	a.exit(h, false)
	stop()
	notes := fmt.Sprintf("B led after A's deadline: %v; terms %d then %d; B's write %s; A, awake %v past its deadline and not checking it, wrote: %s; the observer was delivered last %s",
		after, a.lk.Fence(), b.lk.Fence(), outcome(wb), past.Round(time.Millisecond), outcome(wa), lastDelivered(h))
	return constructedElection("election: frozen leader acts past its deadline without checking (constructed, 3 masters)", "leader frozen past its deadline (no master fault)", h, notes, time.Since(start))
}
