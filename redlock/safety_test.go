package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// partition cuts a client's connections from its own side: while on,
// writes vanish and reads fail after `after`, like a client whose own read
// timeout fires during a network partition. The masters see nothing.
type partition struct {
	on    atomic.Bool
	after time.Duration
}

type cutConn struct {
	net.Conn
	p *partition
}

type cutTimeout struct{}

func (cutTimeout) Error() string   { return "test partition: i/o timeout" }
func (cutTimeout) Timeout() bool   { return true }
func (cutTimeout) Temporary() bool { return true }

func (c *cutConn) Write(b []byte) (int, error) {
	if c.p.on.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.p.on.Load() {
		time.Sleep(c.p.after)
		return 0, cutTimeout{}
	}
	return c.Conn.Read(b)
}

// clients returns one client per master whose connections p can cut.
func (p *partition) clients(t *testing.T, c *lab.Masters) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, c.N())
	for i, addr := range c.Addrs() {
		cl := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 200 * time.Millisecond, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &cutConn{Conn: conn, p: p}, nil
		}})
		t.Cleanup(func() { cl.Close() })
		out[i] = cl
	}
	return out
}

// lockerOn is newLocker over the given clients.
func lockerOn(t *testing.T, c *lab.Masters, clients []redis.UniversalClient, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	for _, cl := range clients {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := redlock.New(clients, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	redlock.WarmUp(l) // the Locker's own connections, as newLocker does
	return l
}

// Do's context must be done by the lock's Deadline() whatever an
// extension call is doing: here every extension hangs for 60 ms and
// fails, and a second Locker polls for the resource. It may only get it
// once fn's context is done. The instant the context ends is the loss
// timer's, which fires a lead before the deadline; a runtime that fires
// it later than the lead (a starved process: a pause, assumption 4) is
// allowed the SafetyMargin, as a paused holder is. The exact promise, on
// a clock no load can delay, is the simulator's (rows kept*: DoneByDeadline).
func TestDoStopsFnByTheDeadlineWhileExtensionsHang(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 500 * time.Millisecond
	p := &partition{after: 60 * time.Millisecond}
	const margin = 100 * time.Millisecond
	opts := &redlock.Options{TTL: ttl, MasterTimeout: 100 * time.Millisecond, SafetyMargin: margin}
	l1 := lockerOn(t, c, p.clients(t, c), opts)
	l2 := newLocker(t, c, opts)
	for run := range 5 {
		resource := fmt.Sprintf("partitioned-%d", run)
		p.on.Store(false)
		var doneAt, deadline, acquiredAt time.Time
		var held *redlock.Lock
		var overlap bool
		err := l1.Do(t.Context(), resource, func(ctx context.Context) error {
			lk, _ := redlock.FromContext(ctx)
			p.on.Store(true)
			got := make(chan struct{})
			go func() {
				defer close(got)
				ctx2 := t.Context()
				poll(time.Hour, func() bool { // until it acquires, or the test ends
					lk2, err := l2.TryLock(ctx2, resource)
					if err != nil {
						return ctx2.Err() != nil
					}
					acquiredAt = time.Now()
					overlap = ctx.Err() == nil
					lk2.Unlock(ctx2)
					return true
				})
			}()
			<-ctx.Done()
			held, doneAt, deadline = lk, time.Now(), lk.Deadline()
			if !errors.Is(context.Cause(ctx), redlock.ErrLost) {
				t.Errorf("run %d: cause %v, want ErrLost", run, context.Cause(ctx))
			}
			<-got
			return nil
		})
		p.on.Store(false)
		if !errors.Is(err, redlock.ErrLost) {
			t.Fatalf("run %d: Do: %v, want ErrLost", run, err)
		}
		// The instant the context ended (the loss timer's reading, not
		// when fn's goroutine was scheduled to see it) against Deadline().
		lostAt := redlock.LostAt(held)
		if lostAt.IsZero() || !lostAt.Before(deadline.Add(margin)) {
			t.Errorf("run %d: fn's ctx was ended at %v, Deadline() %v (fn saw it %v after the deadline)", run, lostAt, deadline, doneAt.Sub(deadline))
		}
		if overlap || acquiredAt.Before(lostAt) {
			t.Errorf("run %d: a second Locker acquired %v before fn's ctx was done (overlap %v)", run, lostAt.Sub(acquiredAt), overlap)
		}
	}
}

// evalCalls is how many scripts master i has run.
func evalCalls(t *testing.T, c *lab.Masters, i int) int {
	t.Helper()
	info, err := c.Client(i).Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") || strings.HasPrefix(line, "cmdstat_eval:calls=") {
			v, _, _ := strings.Cut(strings.SplitN(line, "=", 2)[1], ",")
			k, _ := strconv.Atoi(v)
			n += k
		}
	}
	return n
}

// With a SafetyMargin that leaves less validity than a third of the TTL,
// Do must still pace its extensions (it used to extend back to back).
func TestDoPacesExtensionsFromTheWindow(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	// window = 3000 − 32 − 2100 = 868 ms.
	l := newLocker(t, c, &redlock.Options{TTL: 3 * time.Second, SafetyMargin: 2100 * time.Millisecond})
	before := evalCalls(t, c, 0)
	err := l.Do(t.Context(), "paced", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(1500 * time.Millisecond): // the critical section's length
			return nil
		}
	})
	if err != nil {
		t.Fatalf("Do (1.5 s, longer than the 868 ms window, so it needs extensions): %v", err)
	}
	// A third of the window is about 290 ms: some 3 extensions, plus the
	// release.
	if n := evalCalls(t, c, 0) - before; n < 2 || n > 8 {
		t.Fatalf("master 0 ran %d scripts during a 1.5 s Do, want 2..8", n)
	}
}

// Backoff must not overflow for large delays or many attempts.
func TestBackoffNeverWraps(t *testing.T) {
	c := lab.ForTest(t, 1, nil)
	for _, p := range []redlock.RetryPolicy{
		{MinDelay: time.Hour, MaxDelay: 2 * time.Hour},
		{MinDelay: 9 * time.Second, MaxDelay: 1000 * time.Hour},
		{MinDelay: time.Nanosecond, MaxDelay: time.Duration(1<<63 - 1)},
	} {
		l, err := redlock.New(c.Clients(), &redlock.Options{Retry: p})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		for attempt := 1; attempt <= 200; attempt++ {
			d := redlock.Backoff(l, attempt)
			if d < p.MinDelay/2 || d > p.MaxDelay {
				t.Fatalf("%+v attempt %d: backoff %v outside [MinDelay/2, MaxDelay]", p, attempt, d)
			}
		}
	}
}

// A panic in fn releases the lock, ends the keeper, and is re-raised.
func TestDoPanicReleasesAndRepanics(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ignore := goleak.IgnoreCurrent()
	l := newLocker(t, c, &redlock.Options{TTL: 300 * time.Millisecond, MasterTimeout: 40 * time.Millisecond})
	var got any
	func() {
		defer func() { got = recover() }()
		l.Do(t.Context(), "panics", func(ctx context.Context) error {
			panic("boom")
		})
	}()
	if got != "boom" {
		t.Fatalf("recovered %v, want the fn's panic value", got)
	}
	if vals := keyState(t, c, "panics"); countValue(vals, "") != 5 {
		t.Fatalf("keys left after the panic: %q", vals)
	}
	// Nothing Do started may still run (the keeper would extend the lock
	// forever); the Locker's own goroutines end with Close.
	l.Close()
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
}
