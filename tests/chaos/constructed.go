package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// Constructed scenarios build a fault outside the assumptions step by
// step, so that the violation the theory predicts happens every time and a
// test can assert that the checker finds it. Each returns a Result whose
// Notes say what happened.

// constructedTTL is long enough that no step below comes near a deadline
// on a loaded machine (under -race, 2 cores): every overlap shown is the
// fault's doing, not a slow test.
const constructedTTL = 3 * time.Second

func constructedOptions() *redlock.Options {
	return &redlock.Options{TTL: constructedTTL, MasterTimeout: 50 * time.Millisecond, Fencing: true}
}

// holder is a critical section being recorded by hand.
type holder struct {
	client int
	res    string
	lk     *redlock.Lock
	enter  int64
}

func enter(tb testing.TB, client int, res string, lk *redlock.Lock) *holder {
	tb.Helper()
	if !lk.Valid() {
		tb.Fatalf("client %d: lock on %q not valid right after acquiring", client, res)
	}
	return &holder{client: client, res: res, lk: lk, enter: monoNow()}
}

func (hd *holder) exit(h *History) {
	h.addSection(Section{Client: hd.client, Seq: hd.enter, Resource: hd.res, Enter: hd.enter, Exit: monoNow(), Fence: hd.lk.Fence(), Late: !hd.lk.Valid()})
	_ = hd.lk.Unlock(context.Background())
}

func (hd *holder) write(db resourceStore, h *History) Write {
	fencedWrite(db, hd.client, hd.enter, hd.res, hd.lk.Fence(), hd.lk.Token(), historySink{h})
	ws := h.Writes()
	return ws[len(ws)-1]
}

func tryLock(tb testing.TB, l *redlock.Locker, res string) *redlock.Lock {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Second)
	defer cancel()
	lk, err := l.Lock(ctx, res)
	if err != nil {
		tb.Fatalf("chaos: Lock(%q): %v", res, err)
	}
	return lk
}

// twoClientsOnThree is the setting of the 3-master constructed scenarios:
// the masters, the resource Redis (never faulted) and two clients' Lockers,
// all closed by tb's cleanups.
func twoClientsOnThree(tb testing.TB) (c *lab.Masters, db resourceStore, l1, l2 *redlock.Locker) {
	tb.Helper()
	c = lab.ForTest(tb, 3, nil)
	db = newResource(tb)
	l1 = newLocker(tb, c.Clients(), constructedOptions())
	tb.Cleanup(func() { l1.Close() })
	l2 = newLocker(tb, c.Clients(), constructedOptions())
	tb.Cleanup(func() { l2.Close() })
	return c, db, l1, l2
}

func constructedResult(name, faults string, h *History, notes string, wall time.Duration) Result {
	r := Result{Scenario: name, Faults: faults, Wall: wall, FaultsRun: 1, Notes: notes}
	r.Verdict = Check(h.Sections(), h.Writes())
	return r
}

// RestartEmptyNoDelay: 3 masters. Client 1 holds the lock on all three;
// two masters are killed and restarted empty at once (no delayed restart);
// client 2 then wins those two, a majority, while client 1 is still before
// its deadline. The wipe also loses those masters' fence counters, so
// client 2's fence is computed from counters at 0:
//
//   - after `earlier` holders raised the counters (earlier > 0), client 2's
//     fence is LOWER than client 1's: the resource rejects the new holder
//     and keeps accepting the old one (one writer still wins);
//   - with earlier == 0 both get fence 1; WriteFenced accepts an equal
//     fence only from the owner that wrote it, so the new holder is
//     rejected and the old one keeps writing (one writer still wins).
//
// Both are outside fencing's documented assumption (no master loses its
// counter: appendfsync always). The mutex checker flags the double grant;
// the resource stays consistent but rejects the legitimate new holder.
func RestartEmptyNoDelay(tb testing.TB, earlier int) Result {
	tb.Helper()
	start := time.Now()
	c, db, l1, l2 := twoClientsOnThree(tb)
	const res = "restart-empty"
	h := &History{}
	for range earlier { // earlier holders raise the counters
		hd := enter(tb, 1, res, tryLock(tb, l1, res))
		hd.write(db, h)
		hd.exit(h)
	}
	a := enter(tb, 1, res, tryLock(tb, l1, res))
	a.write(db, h)
	for _, i := range []int{0, 1} {
		if err := c.Restart(tb.Context(), i); err != nil {
			tb.Fatal(err)
		}
	}
	b := enter(tb, 2, res, tryLock(tb, l2, res))
	both := a.lk.Valid() && b.lk.Valid()
	wb := b.write(db, h) // the new holder, with a fence from wiped counters
	wa := a.write(db, h) // the old holder, still before its deadline
	b.exit(h)
	a.exit(h)
	notes := fmt.Sprintf("both valid at once: %v; client 1 fence %d, client 2 fence %d (wiped counters); client 2's write %s, client 1's later write %s",
		both, a.lk.Fence(), b.lk.Fence(), outcome(wb), outcome(wa))
	name := "restart-empty, no delay (constructed, 3 masters; fence goes back)"
	if earlier == 0 {
		name = "restart-empty, no delay (constructed, 3 masters; fence repeats)"
	}
	return constructedResult(name, "2 of 3 masters killed and restarted empty at once", h, notes, time.Since(start))
}

// ClockJump: 3 masters. Client 1 holds on all three; a forward jump of TTL
// (SIMULATED: lab.Masters.JumpClock shrinks every key's TTL by Δ) on two of
// them expires its keys there; client 2 wins those two while client 1 is
// still before its deadline. Fence counters have no TTL and survive, so
// client 2's fence is larger and the resource rejects client 1's late write.
func ClockJump(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c, db, l1, l2 := twoClientsOnThree(tb)
	const res = "clock-jump"
	h := &History{}
	a := enter(tb, 1, res, tryLock(tb, l1, res))
	a.write(db, h)
	for _, i := range []int{0, 1} {
		if _, err := c.JumpClock(tb.Context(), i, constructedTTL); err != nil {
			tb.Fatal(err)
		}
	}
	b := enter(tb, 2, res, tryLock(tb, l2, res))
	both := a.lk.Valid() && b.lk.Valid()
	wb := b.write(db, h)
	wa := a.write(db, h)
	b.exit(h)
	a.exit(h)
	notes := fmt.Sprintf("both valid at once: %v; fences %d then %d; client 2's write %s, client 1's late write %s",
		both, a.lk.Fence(), b.lk.Fence(), outcome(wb), outcome(wa))
	return constructedResult("clock jump (simulated; constructed, 3 masters)", fmt.Sprintf("forward jump Δ=TTL=%v on 2 of 3 masters", constructedTTL), h, notes, time.Since(start))
}

// UnsafeSingleMaster is the test of the checker: a deliberately unsafe lock,
// SET NX PX on one master with no quorum, whose master is restarted empty
// while the lock is held. A second client then acquires it too.
func UnsafeSingleMaster(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c := lab.ForTest(tb, 1, nil)
	m := c.Client(0)
	const res = "unsafe"
	h := &History{}
	acquire := func(client int) (enter int64, deadline time.Time) {
		t0 := time.Now()
		ok, err := m.SetNX(tb.Context(), "unsafe:{"+res+"}", randomToken(tb), constructedTTL).Result()
		if err != nil || !ok {
			tb.Fatalf("unsafe lock: client %d: SET NX = %v, %v", client, ok, err)
		}
		return monoNow(), t0.Add(constructedTTL)
	}
	e1, d1 := acquire(1)
	if err := c.Restart(tb.Context(), 0); err != nil {
		tb.Fatal(err)
	}
	e2, d2 := acquire(2)
	both := time.Now().Before(d1) && time.Now().Before(d2)
	now := monoNow()
	h.addSection(Section{Client: 2, Resource: res, Enter: e2, Exit: now})
	h.addSection(Section{Client: 1, Resource: res, Enter: e1, Exit: now + 1})
	notes := fmt.Sprintf("both before their deadlines at once: %v", both)
	return constructedResult("unsafe single-master SET NX PX (test of the checker)", "its only master restarted empty while held", h, notes, time.Since(start))
}

// Kleppmann reproduces the scenario of "How to do distributed locking"
// (Kleppmann, 2016) literally, on the SAME five masters A..E:
//
//  1. Client 1 acquires the lock on A, B and C; D and E are unreachable
//     for it (its Locker's clients for D and E dial closed ports).
//  2. The clock on C jumps forward (SIMULATED: lab.Masters.JumpClock), so
//     the lock key on C expires.
//  3. Client 2 acquires the lock on C, D and E; A and B are unreachable for
//     it (closed ports likewise).
//  4. Both clients now believe they hold the lock.
//
// Then client 2 writes with its fence, and client 1 (the stale holder)
// writes after it: the fenced resource must reject client 1.
func Kleppmann(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c := lab.ForTest(tb, 5, nil) // A..E = masters 0..4
	db := newResource(tb)
	// Ports 1 and 2 on loopback: nothing listens there, so dialling them
	// is refused; two different ones because the Locker rejects duplicate
	// masters.
	unreachable := func(port int) redis.UniversalClient {
		// One dial attempt per call (go-redis retries a failed dial 5 times,
		// 100 ms apart, and logs each failure).
		cl := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1, DialerRetries: 1, DialTimeout: 20 * time.Millisecond})
		tb.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	all := c.Clients()
	view1 := []redis.UniversalClient{all[0], all[1], all[2], unreachable(1), unreachable(2)}
	all2 := c.Clients()
	view2 := []redis.UniversalClient{unreachable(1), unreachable(2), all2[2], all2[3], all2[4]}
	l1 := newLocker(tb, view1, constructedOptions())
	defer l1.Close()
	l2 := newLocker(tb, view2, constructedOptions())
	defer l2.Close()
	const res = "kleppmann"
	h := &History{}

	lk1, err := l1.TryLock(tb.Context(), res)
	if err != nil {
		tb.Fatalf("client 1 on A, B, C: %v", err)
	}
	a := enter(tb, 1, res, lk1)
	if _, err := c.JumpClock(tb.Context(), 2, constructedTTL); err != nil { // C
		tb.Fatal(err)
	}
	lk2, err := l2.TryLock(tb.Context(), res)
	if err != nil {
		tb.Fatalf("client 2 on C, D, E: %v", err)
	}
	b := enter(tb, 2, res, lk2)
	both := lk1.Valid() && lk2.Valid()
	wb := b.write(db, h)
	wa := a.write(db, h)
	b.exit(h)
	a.exit(h)
	oks := func(lk *redlock.Lock) (n int) {
		for _, nd := range lk.Acquisition().Masters {
			if nd.Outcome == quorum.OK {
				n++
			}
		}
		return n
	}
	notes := fmt.Sprintf("client 1 acquired on %d of 5 (A, B, C), client 2 on %d of 5 (C, D, E); both valid at once: %v; fences %d, %d; client 2's write %s, client 1's write %s",
		oks(lk1), oks(lk2), both, lk1.Fence(), lk2.Fence(), outcome(wb), outcome(wa))
	return constructedResult("Kleppmann's scenario, literal (5 masters)", "D,E unreachable for client 1; C's clock jumps (sim); A,B unreachable for client 2", h, notes, time.Since(start))
}

func outcome(w Write) string {
	switch {
	case w.Accepted:
		return "accepted"
	case w.Stale:
		return "rejected as stale"
	}
	return "failed: " + w.Err
}

func randomToken(tb testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}
