package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A MasterTimeout wide enough for a cold connection's first round under
// -race on a loaded machine (300 ms was overrun beside stress-ng and other
// tests on two cores); the tests never assert speed below it.
const nodeTimeout = time.Second

func newLocker(t *testing.T, m *redlocktest.Masters, o redlock.Options) *redlock.Locker {
	t.Helper()
	if o.MasterTimeout == 0 {
		o.MasterTimeout = nodeTimeout
	}
	l, err := m.Locker(&o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// warm takes and releases a lock until one reaches every master, so that
// every master has been dialled: the first round waits for every master
// (redlock.Locker identifies each on first contact), and a master stalled
// before it shows TimedOut rather than Pending. On a loaded machine under
// -race a cold first round can overrun MasterTimeout, and a master that
// timed out is skipped for a while: warm tries again until one lock is on
// every master.
func warm(t *testing.T, m *redlocktest.Masters, l *redlock.Locker) {
	t.Helper()
	ctx := context.Background()
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var lk *redlock.Lock
		if lk, err = l.TryLock(ctx, "warm-up"); err != nil {
			continue
		}
		everywhere := false
		for until := time.Now().Add(5 * time.Second); !everywhere && time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
			everywhere = m.Holding(l, lk) == m.N()
		}
		if err = lk.Unlock(ctx); err == nil && everywhere {
			return
		}
	}
	t.Fatalf("warm-up: no lock reached every master in 30s (last error: %v)", err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5s: %s", what)
		}
	}
}

// resumeAndDrain resumes the stalled masters idx, each of which was sent
// an acquisition's SET and then its release while stalled, waits until each
// has run both (two more commands), and checks that no key is left.
func resumeAndDrain(t *testing.T, m *redlocktest.Masters, l *redlock.Locker, resource string, idx ...int) {
	t.Helper()
	before := make([]int, len(idx))
	for k, i := range idx {
		before[k] = m.Servers()[i].CommandCount()
	}
	must(t, m.Resume(idx...))
	eventually(t, "the resumed masters did not run the SET and its release", func() bool {
		for k, i := range idx {
			if m.Servers()[i].CommandCount() < before[k]+2 {
				return false
			}
		}
		return true
	})
	eventually(t, "a resumed master kept the key", func() bool { return allEmpty(m.Tokens(l, resource)) })
}

func allEmpty(tokens []string) bool {
	return !slices.ContainsFunc(tokens, func(s string) bool { return s != "" })
}

func TestLockUnlock(t *testing.T) {
	for _, via := range []bool{false, true} {
		t.Run(fmt.Sprintf("ViaClient=%v", via), func(t *testing.T) {
			m := redlocktest.New(t, nil)
			if m.N() != 5 || len(m.Addrs()) != 5 || len(m.Clients()) != 5 || len(m.Servers()) != 5 {
				t.Fatalf("N %d, %d addrs, %d clients, %d servers; want 5 of each", m.N(), len(m.Addrs()), len(m.Clients()), len(m.Servers()))
			}
			l := newLocker(t, m, redlock.Options{ViaClient: via})
			ctx := context.Background()
			lk, err := l.TryLock(ctx, "invoice:42")
			must(t, err)
			// A master that answered after the majority (a loaded machine)
			// still sets the key.
			want := []string{lk.Token(), lk.Token(), lk.Token(), lk.Token(), lk.Token()}
			eventually(t, "the token on every master", func() bool { return slices.Equal(m.Tokens(l, "invoice:42"), want) })
			// The key is where the documented naming says, with the TTL.
			for i, s := range m.Servers() {
				if v, err := s.Get("redlock:{invoice:42}"); err != nil || v != lk.Token() {
					t.Fatalf("master %d: redlock:{invoice:42} = %q, %v", i, v, err)
				}
				if ttl := s.TTL("redlock:{invoice:42}"); ttl <= 0 || ttl > 10*time.Second {
					t.Fatalf("master %d: TTL %v, want in (0, 10s]", i, ttl)
				}
			}
			for i, n := range lk.Acquisition().Masters {
				if n.Outcome != quorum.OK {
					t.Fatalf("master %d: %v, want ok", i, n.Outcome)
				}
			}
			// extend.lua on miniredis: the deadline moves on.
			before := lk.Deadline()
			time.Sleep(5 * time.Millisecond)
			must(t, lk.Extend(ctx))
			if !lk.Deadline().After(before) {
				t.Fatalf("Extend: deadline %v, not after %v", lk.Deadline(), before)
			}
			// Held: a second Locker is refused by every master.
			other := newLocker(t, m, redlock.Options{ViaClient: via})
			_, err = other.TryLock(ctx, "invoice:42")
			var e *redlock.Error
			if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) || e.Count(quorum.Refused) != 5 {
				t.Fatalf("second TryLock: %v, want ErrNotAcquired refused by 5", err)
			}
			must(t, lk.Unlock(ctx))
			if got := m.Tokens(l, "invoice:42"); !allEmpty(got) {
				t.Fatalf("after Unlock: tokens %q, want none", got)
			}
			lk2, err := other.TryLock(ctx, "invoice:42")
			must(t, err)
			// TryLock returns at a majority; the last SETs land just after.
			if n := m.Holding(other, lk2); n < 3 {
				t.Fatalf("after the release, the other Locker holds %d masters, want a majority", n)
			}
			eventually(t, "the other Locker's lock did not reach all 5 masters", func() bool { return m.Holding(other, lk2) == 5 })
		})
	}
}

func TestKeyNaming(t *testing.T) {
	m := redlocktest.New(t, &redlocktest.Options{N: 3})
	ctx := context.Background()
	for _, o := range []redlock.Options{{KeyPrefix: "app:"}, {RedsyncKeys: true}} {
		l := newLocker(t, m, o)
		lk, err := l.TryLock(ctx, "r")
		must(t, err)
		key := map[bool]string{false: "app:{r}", true: "r"}[o.RedsyncKeys]
		if v, err := m.Servers()[0].Get(key); err != nil || v != lk.Token() {
			t.Fatalf("%+v: key %q = %q, %v", o, key, v, err)
		}
		if n := m.Holding(l, lk); n != 3 {
			t.Fatalf("%+v: Holding %d, want 3", o, n)
		}
		if n := m.Holding(nil, lk); n != 0 {
			t.Fatalf("%+v: Holding with the default naming %d, want 0", o, n)
		}
		must(t, lk.Unlock(ctx))
	}
}

func TestTwoOfFiveStalled(t *testing.T) {
	m := redlocktest.New(t, nil)
	l := newLocker(t, m, redlock.Options{})
	warm(t, m, l)
	must(t, m.Stall(3, 4))
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "invoice:42")
	must(t, err)
	for i, n := range lk.Acquisition().Masters {
		switch {
		case i < 3 && n.Outcome != quorum.OK:
			t.Errorf("master %d: %v, want ok", i, n.Outcome)
		case i >= 3 && n.Outcome != quorum.Pending && n.Outcome != quorum.Unavailable:
			t.Errorf("stalled master %d: %v, want pending or unavailable", i, n.Outcome)
		}
	}
	tok := lk.Token()
	if got, want := m.Tokens(l, "invoice:42"), []string{tok, tok, tok, "", ""}; !slices.Equal(got, want) {
		t.Fatalf("tokens %q, want %q", got, want)
	}
	// Unlock releases the three now; the releases for the stalled two wait
	// behind their SET, which is still queued in front of them.
	must(t, lk.Unlock(ctx))
	if got := m.Tokens(l, "invoice:42"); !allEmpty(got) {
		t.Fatalf("after Unlock, while stalled: tokens %q, want none (the stalled two never got the SET)", got)
	}
	// On resume the stalled masters run what they were sent, in order: the
	// SET, then the release; the key must not be left behind.
	resumeAndDrain(t, m, l, "invoice:42", 3, 4)
	lk2, err := l.TryLock(ctx, "invoice:42")
	must(t, err)
	if n := m.Holding(l, lk2); n < 3 {
		t.Fatalf("after Resume: held on %d masters, want a majority", n)
	}
}

func TestThreeOfFiveStalled(t *testing.T) {
	m := redlocktest.New(t, nil)
	l := newLocker(t, m, redlock.Options{})
	warm(t, m, l)
	must(t, m.Stall(0, 1, 2))
	ctx := context.Background()
	start := time.Now()
	_, err := l.TryLock(ctx, "invoice:42")
	took := time.Since(start)
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	if e.Count(quorum.OK) != 2 || e.Count(quorum.TimedOut) != 3 {
		t.Fatalf("TryLock: %v; want 2 ok and 3 timed out", err)
	}
	// The round waits MasterTimeout for the stalled three, then gives up:
	// generous upper bound for a loaded machine.
	if took < nodeTimeout*9/10 || took > nodeTimeout+3*time.Second {
		t.Fatalf("TryLock took %v, want about MasterTimeout %v", took, nodeTimeout)
	}
	// The failed attempt released the two that granted it.
	if got := m.Tokens(l, "invoice:42"); !allEmpty(got) {
		t.Fatalf("after the failed TryLock: tokens %q, want none", got)
	}
	// Now the three are skipped: the next attempt does not ask them.
	_, err = l.TryLock(ctx, "invoice:42")
	if !errors.As(err, &e) || e.Count(quorum.Unavailable) != 3 {
		t.Fatalf("second TryLock: %v, want 3 unavailable", err)
	}
	resumeAndDrain(t, m, l, "invoice:42", 0, 1, 2)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lk, err := l.Lock(lctx, "invoice:42")
	must(t, err)
	must(t, lk.Unlock(ctx))
}

func TestRefuse(t *testing.T) {
	m := redlocktest.New(t, nil)
	l := newLocker(t, m, redlock.Options{})
	warm(t, m, l)
	ctx := context.Background()

	must(t, m.Refuse(0, 1))
	lk, err := l.TryLock(ctx, "a")
	must(t, err)
	if got, tok := m.Tokens(l, "a"), lk.Token(); !slices.Equal(got, []string{"", "", tok, tok, tok}) {
		t.Fatalf("two refused: tokens %q", got)
	}
	for i, n := range lk.Acquisition().Masters[:2] {
		if n.Outcome == quorum.OK {
			t.Fatalf("refused master %d: ok", i)
		}
	}
	must(t, lk.Unlock(ctx))

	must(t, m.Refuse(2))
	start := time.Now()
	_, err = l.TryLock(ctx, "b")
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) || e.Count(quorum.OK) > 2 {
		t.Fatalf("three refused: %v, want ErrNotAcquired", err)
	}
	if took := time.Since(start); took > nodeTimeout+3*time.Second {
		t.Fatalf("three refused: TryLock took %v", took)
	}
	if got := m.Tokens(l, "b"); !allEmpty(got) {
		t.Fatalf("after the failed TryLock: tokens %q, want none", got)
	}

	// A client of one's own sees the refusal too (no retries: go-redis
	// would retry a reset connection three times, with backoff).
	own := redis.NewClient(&redis.Options{Addr: m.Addrs()[0], MaxRetries: -1})
	defer own.Close()
	if err := own.Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a refused master succeeded")
	}

	must(t, m.Heal(0, 1, 2))
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lk, err = l.Lock(lctx, "b")
	must(t, err)
	must(t, own.Ping(ctx).Err())
	eventually(t, "the lock did not reach the accepting masters", func() bool {
		lk2, err := l.TryLock(ctx, "c")
		if err != nil {
			return false
		}
		defer lk2.Unlock(ctx)
		return m.Holding(l, lk2) == 5
	})
	must(t, lk.Unlock(ctx))
}

func TestFencing(t *testing.T) {
	m := redlocktest.New(t, nil)
	l := newLocker(t, m, redlock.Options{Fencing: true})
	ctx := context.Background()
	resource := miniredis.RunT(t) // where the fenced writes go: not a lock master
	rc := redis.NewClient(&redis.Options{Addr: resource.Addr()})
	defer rc.Close()

	var fences []uint64
	var tokens []string
	for range 3 {
		lk, err := l.TryLock(ctx, "account:7")
		must(t, err)
		fences = append(fences, lk.Fence())
		tokens = append(tokens, lk.Token())
		must(t, redlock.WriteFenced(ctx, rc, "account:7", lk.Fence(), lk.Token(), fmt.Sprint("balance ", len(fences))))
		must(t, lk.Unlock(ctx))
	}
	if !(fences[0] > 0 && fences[0] < fences[1] && fences[1] < fences[2]) {
		t.Fatalf("fences %v, want strictly increasing from above 0", fences)
	}
	for i, f := range m.Fences(l, "account:7") {
		if f != fences[2] {
			t.Fatalf("master %d: fence counter %d, want %d", i, f, fences[2])
		}
	}
	// A holder with an older fence is rejected by the resource.
	err := redlock.WriteFenced(ctx, rc, "account:7", fences[1], tokens[1], "stale")
	if !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("stale write: %v, want ErrStaleFence", err)
	}
	v, f, err := redlock.ReadFenced(ctx, rc, "account:7")
	if err != nil || v != "balance 3" || f != fences[2] {
		t.Fatalf("ReadFenced: %q, %d, %v; want %q, %d", v, f, err, "balance 3", fences[2])
	}
}

func TestDo(t *testing.T) {
	m := redlocktest.New(t, nil)
	// TTL 1s: Do must extend the lock to keep fn's context alive for 1.5s.
	l := newLocker(t, m, redlock.Options{TTL: time.Second, MasterTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	ran := false
	err := l.Do(ctx, "cron:nightly", func(ctx context.Context) error {
		lk, ok := redlock.FromContext(ctx)
		if !ok {
			return errors.New("no lock in fn's context")
		}
		if n := m.Holding(l, lk); n < 3 {
			return fmt.Errorf("held on %d masters, want a majority", n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fn's context ended: %w", context.Cause(ctx))
		case <-time.After(1500 * time.Millisecond):
		}
		if n := m.Holding(l, lk); n < 3 {
			return fmt.Errorf("after 1.5s, held on %d masters, want a majority (extended)", n)
		}
		ran = true
		return nil
	})
	must(t, err)
	if !ran {
		t.Fatal("fn did not run")
	}
	if got := m.Tokens(l, "cron:nightly"); !allEmpty(got) {
		t.Fatalf("after Do: tokens %q, want none", got)
	}
	boom := errors.New("boom")
	if err := l.Do(ctx, "cron:nightly", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do: %v, want fn's error", err)
	}
}

func TestExpiry(t *testing.T) {
	m := redlocktest.New(t, &redlocktest.Options{N: 3})
	ctx := context.Background()

	// Keys expire in real time.
	l := newLocker(t, m, redlock.Options{TTL: 200 * time.Millisecond, MasterTimeout: 50 * time.Millisecond})
	warm(t, m, l) // a cold first round dials, which 50 ms may not cover under load
	lk, err := l.TryLock(ctx, "short")
	must(t, err)
	if n := m.Holding(l, lk); n == 0 {
		t.Fatal("the lock is on no master")
	}
	eventually(t, "keys did not expire", func() bool { return allEmpty(m.Tokens(l, "short")) })
	if lk.Valid() {
		t.Fatal("keys expired while the lock was still valid")
	}

	// FastForward: the masters lose the key; the holder's own clock does
	// not move.
	a := newLocker(t, m, redlock.Options{})
	lk, err = a.TryLock(ctx, "long")
	must(t, err)
	m.FastForward(11 * time.Second)
	if got := m.Tokens(a, "long"); !allEmpty(got) {
		t.Fatalf("after FastForward past the TTL: tokens %q", got)
	}
	if !lk.Valid() {
		t.Fatal("FastForward moved the Locker's clock")
	}
	b := newLocker(t, m, redlock.Options{})
	lk2, err := b.TryLock(ctx, "long")
	must(t, err)
	if n := m.Holding(b, lk2); n < 2 {
		t.Fatalf("the second holder is on %d masters, want a majority of 3", n)
	}
	if err := lk.Extend(ctx); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Extend of the fast-forwarded lock: %v, want ErrLost", err)
	}
}

func TestBadInput(t *testing.T) {
	for _, n := range []int{-1, redlocktest.MaxN + 1} {
		m, err := redlocktest.Start(&redlocktest.Options{N: n})
		if err == nil || m != nil || !strings.Contains(err.Error(), "Options.N") {
			t.Fatalf("N=%d: %v, %v; want an error naming Options.N", n, m, err)
		}
	}
	m, err := redlocktest.Start(&redlocktest.Options{N: 1})
	must(t, err)
	if m.N() != 1 {
		t.Fatalf("N() = %d, want 1", m.N())
	}
	for name, do := range map[string]func(...int) error{"Stall": m.Stall, "Resume": m.Resume, "Refuse": m.Refuse, "Heal": m.Heal} {
		if err := do(1); err == nil || !strings.Contains(err.Error(), "no master 1") {
			t.Errorf("%s(1) with one master: %v", name, err)
		}
		if err := do(-1); err == nil {
			t.Errorf("%s(-1): no error", name)
		}
		if err := do(); err == nil {
			t.Errorf("%s(): no error", name)
		}
	}
	if _, err := m.Locker(&redlock.Options{TTL: -time.Second}); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Locker with a negative TTL: %v, want ErrInvalid", err)
	}
	if n := m.Holding(nil, nil); n != 0 {
		t.Fatalf("Holding(nil, nil) = %d", n)
	}
	must(t, m.Close())
	must(t, m.Close()) // idempotent
	if err := m.Stall(0); err == nil {
		t.Fatal("Stall after Close: no error")
	}
	if _, err := m.Locker(nil); err == nil {
		t.Fatal("Locker after Close: no error")
	}
}

// Close leaves nothing running, whatever state the masters and Lockers
// were left in.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	m, err := redlocktest.Start(nil)
	must(t, err)
	l, err := m.Locker(&redlock.Options{MasterTimeout: nodeTimeout})
	must(t, err)
	ctx := context.Background()
	if _, err := l.TryLock(ctx, "held"); err != nil { // never unlocked
		t.Fatal(err)
	}
	must(t, m.Stall(1, 2))
	must(t, m.Refuse(3))
	_, err = l.TryLock(ctx, "other")
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 3 of 5 down: %v", err)
	}
	must(t, m.Close())
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
}

// The release script is to PUBLISH on the lock key so that waiters wake on
// release: miniredis must run PUBLISH from Lua and deliver it to a
// SUBSCRIBE through the front door.
func TestPublishFromLua(t *testing.T) {
	m := redlocktest.New(t, &redlocktest.Options{N: 1})
	ctx := context.Background()
	c := m.Clients()[0]
	sub := c.Subscribe(ctx, "redlock:{r}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	n, err := c.Eval(ctx, "return redis.call('PUBLISH', KEYS[1], ARGV[1])", []string{"redlock:{r}"}, "released").Int()
	if err != nil || n != 1 {
		t.Fatalf("PUBLISH from Lua: %d receivers, %v; want 1", n, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil || msg.Channel != "redlock:{r}" || msg.Payload != "released" {
		t.Fatalf("message %+v, %v", msg, err)
	}
}
