package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Two fallbacks that articles on distributed locks propose for when the
// lock cannot be kept, built here as their authors describe them and run
// through the same checker as everything else: each lets two holders in at
// once (docs/choosing.md, "Rejected patterns"). Neither is something this
// library offers; these are the evidence for not offering them.

// fallbackTTL is short so that the primary lock really expires (no clock
// jump, no restart: every master stays healthy) within a test's patience.
const fallbackTTL = 400 * time.Millisecond

func fallbackLockers(tb testing.TB) (*lab.Masters, *redlock.Locker, *redlock.Locker) {
	tb.Helper()
	c := lab.ForTest(tb, 3, &lab.Options{Proxy: true})
	opts := &redlock.Options{TTL: fallbackTTL, MasterTimeout: 50 * time.Millisecond}
	l1 := newLocker(tb, c.Clients(), opts)
	tb.Cleanup(func() { l1.Close() })
	l2 := newLocker(tb, c.Clients(), opts)
	tb.Cleanup(func() { l2.Close() })
	return c, l1, l2
}

// ShadowLock: a holder whose renewal fails "escalates" to a second key
// namespace with a longer TTL and carries on. Client 1 takes the lock; two
// of the three masters are cut off (for everyone), so its renewal fails
// with ErrLost while its deadline is still ahead; it leaves the critical
// section, as it should, and then, as the fallback says, takes
// shadow:{res} with SET NX and ten times the TTL on the master it still
// reaches, which nobody else contends for, and enters again under it. The
// masters come back; client 2, which knows only the real lock, takes it
// once client 1's keys expire. Both hold "a" lock at once, with no pause
// and no fault on any master outside the assumptions: the fallback alone
// lets client 2 in.
func ShadowLock(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c, l1, l2 := fallbackLockers(tb)
	const res = "shadow"
	h := &History{}
	a := enter(tb, 1, res, tryLock(tb, l1, res))
	for _, i := range []int{1, 2} {
		if err := c.Cut(i); err != nil {
			tb.Fatal(err)
		}
	}
	renewErr := a.lk.Extend(tb.Context())
	if !errors.Is(renewErr, redlock.ErrLost) {
		tb.Fatalf("client 1's renewal with 2 of 3 masters cut off: %v, want ErrLost", renewErr)
	}
	inTime := a.lk.Valid()
	a.exit(h) // the renewal failed: client 1 stops, before its deadline
	ok, err := c.Client(0).SetNX(tb.Context(), "shadow:{"+res+"}", randomToken(tb), 10*fallbackTTL).Result()
	if err != nil || !ok {
		tb.Fatalf("client 1's shadow key: %v, %v", ok, err)
	}
	e1 := monoNow() // in again, under the shadow key
	for _, i := range []int{1, 2} {
		if err := c.Heal(i); err != nil {
			tb.Fatal(err)
		}
	}
	lk2 := tryLock(tb, l2, res) // waits for client 1's real keys to expire
	e2 := monoNow()
	shadowHeld, _ := c.Client(0).Exists(tb.Context(), "shadow:{"+res+"}").Result()
	both := shadowHeld == 1 && lk2.Valid()
	bothExit(h, res, e1, e2, lk2)
	notes := fmt.Sprintf("client 1's renewal: %v (its first section ended before its deadline: %v); client 1 re-entered under the shadow key; client 2 took the real lock; both believed they held the lock at once: %v", renewErr, inTime, both)
	return constructedResult("shadow-lock fallback (rejected pattern)", "2 of 3 masters cut off for a renewal, then healed", h, notes, time.Since(start))
}

// CircuitBreakerFallback: while the lock service is down, the work goes
// on without the lock. Every master is stopped (SIGSTOP); client 1's
// acquisition fails, its breaker opens, and it enters the critical section
// anyway. The masters come back; client 2, whose breaker is closed, takes
// the lock and enters too, while client 1 is still inside.
func CircuitBreakerFallback(tb testing.TB) Result {
	tb.Helper()
	start := time.Now()
	c, l1, l2 := fallbackLockers(tb)
	const res = "breaker"
	h := &History{}
	for i := range c.N() {
		if err := c.Pause(i); err != nil {
			tb.Fatal(err)
		}
	}
	_, err1 := l1.TryLock(tb.Context(), res)
	if err1 == nil {
		tb.Fatal("client 1 acquired with every master stopped")
	}
	e1 := monoNow() // breaker open: in without the lock
	c.ResumeAll()
	lk2 := tryLock(tb, l2, res)
	e2 := monoNow()
	both := lk2.Valid() // client 1 believes it may proceed until its work ends
	bothExit(h, res, e1, e2, lk2)
	notes := fmt.Sprintf("client 1's acquisition: %v; it went on without the lock; client 2 took the lock once the masters answered; both believed they held the lock at once: %v", errors.Is(err1, redlock.ErrNotAcquired), both)
	return constructedResult("circuit-breaker fallback (rejected pattern)", "every master stopped, then resumed", h, notes, time.Since(start))
}

// bothExit records the two overlapping sections of a fallback scenario,
// client 1's entered at e1 (under the fallback) and client 2's at e2 (under
// the lock), ending now, client 1 last; then it releases client 2's lock.
func bothExit(h *History, res string, e1, e2 int64, lk2 *redlock.Lock) {
	now := monoNow()
	h.addSection(Section{Client: 2, Resource: res, Enter: e2, Exit: now})
	h.addSection(Section{Client: 1, Seq: e1, Resource: res, Enter: e1, Exit: now + 1})
	_ = lk2.Unlock(context.Background())
}
