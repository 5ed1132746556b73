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
