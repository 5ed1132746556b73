package redlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/quorum"
)

// The Locker's own checks, in memory (locker.go's conditions and
// arithmetic lived mutated against the simulator, whose processes build
// their Lockers right and call them right): NewMasters' ownership of its
// clients, the masters it refuses and how it names them, the warning on
// an even or small number of masters, the calls it refuses, the backoff,
// the fence, the reason of a refusal, and a round with no validity left.
func TestMutateNewMasters(t *testing.T) {
	// A go-redis client given to NewMasters is the Locker's: closed when
	// NewMasters fails, left open when it succeeds (until Close).
	for _, bad := range []bool{true, false} {
		m := driver.GoRedis(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		cl := m.(goRedisClient).GoRedisClient()
		o := &Options{}
		if bad {
			o.TTL = -time.Second
		}
		l, err := NewMasters([]driver.Master{m}, o)
		closed := errors.Is(cl.Ping(context.Background()).Err(), redis.ErrClosed)
		if l != nil {
			l.Close()
		}
		if (err != nil) != bad || closed != bad {
			t.Errorf("NewMasters with bad options %v: error %v, client closed %v; want the client closed only when it fails", bad, err, closed)
		}
	}

	clk := &memClock{base: time.Now()}
	mem := func(addr string) *simDriver { return &simDriver{m: sim.New(addr, nil), clk: clk, addr: addr} }
	one := mem("mem:1")
	for _, c := range []struct {
		masters []driver.Master
		want    string
	}{
		{[]driver.Master{one, one}, "masters 0 and 1 are the same master (0x"},
		{[]driver.Master{one, mem("mem:1")}, "masters 0 and 1 are the same master (mem:1)"},
		{[]driver.Master{one, mem("MEM:01")}, "masters 0 and 1 are the same master (mem:1 and mem:01)"},
		{[]driver.Master{one, (*simDriver)(nil)}, "master 1 is a nil client"},
	} {
		l, err := newLocker(c.masters, nil, memEnv{clk: clk}, nil)
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("newLocker: %v, want ErrInvalid naming %q", err, c.want)
		}
	}
}

// An even number of masters, or fewer than 3, is logged with what it
// tolerates.
func TestMutateMasterCountWarning(t *testing.T) {
	for n, want := range map[int]string{
		2: "redlock: 2 master(s) tolerate no master failing or stalling (a majority is all 2)",
		4: "redlock: 4 masters tolerate 1 master(s) failing, as 3 do",
		6: "redlock: 6 masters tolerate 2 master(s) failing, as 5 do",
	} {
		var buf bytes.Buffer
		simDriverLocker(t, n, &Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%d masters logged %q, want %q", n, buf.String(), want)
		}
	}
}

// LockAll refuses a nil context; TryLockAll a resource listed twice, and
// takes distinct ones.
func TestMutateLockAllArguments(t *testing.T) {
	l, _, _ := simDriverLocker(t, 3, nil)
	//lint:ignore SA1012 a nil context is what is tested
	if _, err := l.LockAll(nil, []string{"a", "b"}); !errors.Is(err, ErrInvalid) { //nolint:staticcheck
		t.Errorf("LockAll(nil): %v, want ErrInvalid", err)
	}
	if _, err := l.TryLockAll(t.Context(), []string{"b", "a", "b"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"b" is listed twice`) {
		t.Errorf("TryLockAll(b, a, b): %v, want ErrInvalid naming b listed twice", err)
	}
	lk, err := l.TryLockAll(t.Context(), []string{"b", "a"})
	if err != nil {
		t.Fatalf("TryLockAll(b, a): %v", err)
	}
	lk.Unlock(t.Context())
}

// The backoff: MinDelay·2^(n−1) capped at MaxDelay, drawn from its upper
// half (the in-memory env draws the largest: d/2 + d/2).
func TestMutateBackoff(t *testing.T) {
	l := &Locker{env: memEnv{}, opts: Options{Retry: RetryPolicy{MinDelay: 5 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}}
	for attempt, want := range []time.Duration{100, 5, 10, 20, 40, 80, 100, 100} {
		if got := l.backoff(attempt); got != want*time.Millisecond {
			t.Errorf("backoff(%d) = %v, want %v", attempt, got, want*time.Millisecond)
		}
	}
	for d, want := range map[time.Duration]time.Duration{1: 1, 3: 2} {
		l.opts.Retry = RetryPolicy{MinDelay: d, MaxDelay: d}
		if got := l.backoff(1); got != want {
			t.Errorf("backoff of %v = %v, want %v", d, got, want)
		}
	}
	// MinDelay = MaxDelay>>2 with bits shifted out: the third attempt is
	// MinDelay·4 = 100ns, under the cap of 103ns.
	l.opts.Retry = RetryPolicy{MinDelay: 25, MaxDelay: 103}
	if got := l.backoff(3); got != 100 {
		t.Errorf("backoff(3) from 25ns capped at 103ns = %v, want 100ns", got)
	}
}

// A fenced lock gets the fence one more than the majority's counter; one
// whose Locker begins closing between its rounds is refused, ErrClosed;
// a refused round says the lock is held by another owner; and a round
// that took the whole validity window fails.
func TestMutateAcquireRounds(t *testing.T) {
	l, ms, clk := simDriverLocker(t, 3, &Options{TTL: time.Second, Fencing: true})
	lk, err := l.TryLock(t.Context(), "f")
	if err != nil || lk.Fence() != 1 {
		t.Fatalf("fenced TryLock: %v, %v; want fence 1", lk, err)
	}
	lk.Unlock(t.Context())
	l.betweenRounds = func() {
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
	}
	_, err = l.TryLock(t.Context(), "g")
	l.betweenRounds = nil
	l.mu.Lock()
	l.closing = false
	l.mu.Unlock()
	if !errors.Is(err, ErrClosed) {
		t.Errorf("a fenced TryLock whose Locker began closing between its rounds: %v, want ErrClosed", err)
	}

	tg, _ := l.target("h")
	for _, m := range ms {
		m.run("SET", tg.key, "another", "PX", "10000")
	}
	_, err = l.TryLock(t.Context(), "h")
	var e *Error
	if !errors.As(err, &e) || e.Reason != "held by another owner" {
		t.Errorf("TryLock of a key another holds: %v, want the reason %q", err, "held by another owner")
	}

	var once sync.Once
	for _, m := range ms {
		m.refuseWith("", func(args []string) bool {
			if len(args) > 2 && args[0] == "EVALSHA" {
				once.Do(func() { clk.pass(l.opts.budget().Window()) }) // before the decision
			}
			return false
		})
	}
	if lk, err := l.TryLock(t.Context(), "v"); err == nil {
		t.Errorf("a round that took the whole validity window acquired, with %v left", lk.Acquisition().Validity)
	}
}

// Once every master has been tried, a round returns at its decision and
// does not wait for a master that has not answered; a master's refusal is
// reported without an error, another failure with its error.
func TestMutateRoundDecision(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, nil)
	lk, err := l.TryLock(t.Context(), "first")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	hold := make(chan struct{})
	ms[2].refuseWith("", func([]string) bool { <-hold; return false })
	done := make(chan error, 1)
	released := make(chan struct{})
	go func() {
		defer close(released)
		lk, err := l.TryLock(context.Background(), "second")
		done <- err
		if err == nil {
			lk.Unlock(context.Background()) // a release waits for every master
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("TryLock with master 2 held back: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("TryLock waited for master 2 with a majority decided")
	}
	close(hold)
	<-released

	// Master 0 refuses (another holds the key), master 2 fails: the
	// round is decided once both have answered.
	ms[2].refuseWith("", nil)
	tg, _ := l.target("held")
	ms[0].run("SET", tg.key, "another", "PX", "10000")
	ms[2].refuseWith("ERR refused by the test", func([]string) bool { return true })
	_, err = l.TryLock(t.Context(), "held")
	ms[2].refuseWith("", nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("TryLock refused by one master and failed by another: %v", err)
	}
	if m := e.Masters[0]; m.Outcome != quorum.Refused || m.Err != nil {
		t.Errorf("master 0: %v, %v; want refused, with no error", m.Outcome, m.Err)
	}
	if m := e.Masters[2]; m.Err == nil {
		t.Errorf("master 2, failing every command: %v with no error, want its error", m.Outcome)
	}
}

// A release passes the queue and may hand the key on only when someone
// may be waiting (the lock was taken after a wait, or this Locker's
// callers waited for the key lately): a TryLock's release on a Locker
// nobody waits on only deletes its key. A release that named a waiter on
// a majority of masters tells the Locker that the key is being handed on
// (a caller of its own then queues behind it, docs/design.md §14.1).
func TestMutateReleaseHandsOn(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{TTL: time.Second})
	log := spy(ms)
	release := sha(t, "release.lua")
	lk, err := l.TryLock(t.Context(), "solo")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	flush(l)
	if r := log.last(0, func(a []string) bool { return isScript(a, release) }); len(r) < 3 || r[2] != "1" {
		t.Errorf("the release of an uncontended TryLock is %q, want the lock key alone", r)
	}

	tg, _ := l.target("waited")
	for _, m := range ms {
		m.run("SET", tg.key, "someone", "PX", "300")
	}
	lk, err = l.Lock(t.Context(), "waited")
	if err != nil {
		t.Fatal(err)
	}
	flush(l)
	ms[0].run("ZADD", tg.key+queueSuffix, "1", "other.1")
	ms[1].run("ZADD", tg.key+queueSuffix, "1", "other.1")
	lk.Unlock(t.Context())
	flush(l)
	r := log.last(0, func(a []string) bool { return isScript(a, release) })
	if len(r) < 8 || r[2] != "2" || r[7] != "h" {
		t.Errorf("the release of a mutex taken after a wait is %q, want the queue passed and the key handed on ('h')", r)
	}
	if !l.wake.handingOn(tg, time.Hour) {
		t.Error("a release that named a waiter on 2 of 3 masters did not note the key as handed on")
	}
	// This Locker's callers waited for the key lately: a TryLock's
	// release passes the queue too.
	lk, err = l.TryLock(t.Context(), "waited")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	flush(l)
	if r := log.last(0, func(a []string) bool { return isScript(a, release) }); len(r) < 3 || r[2] != "2" {
		t.Errorf("the release of a TryLock on a key this Locker waited for lately is %q, want the queue passed", r)
	}
}
