package redlock

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/quorum"
)

// In-memory masters for make mutate's fast set: the simulator's models of
// Redis (internal/sim) behind driver.Master, on a clock the test steps. A
// Locker over them runs its real rounds with no server and no timing: its
// waits return at once and move the clock by what they would have waited,
// and every wait is recorded, so a test can check how often and how long
// a call paused.

// memClock is the time of a memEnv and of its masters.
type memClock struct {
	mu   sync.Mutex
	base time.Time     // the wall clock when the test began: a deadline the Locker sets with a context is one
	at   time.Duration // since base
	log  []time.Duration
	max  int             // sleeps past max end at once (wakeCtx); 0: none do
	bg   []time.Duration // the Locker's own sleeps (quit is Background), asked for
	// settle, before the clock moves, waits until every master has run
	// what was sent to it: a round returns at its decision, and a
	// master whose command was still on its way would otherwise run it
	// at a later instant, or after the next step, as the goroutines fall.
	settle func()
}

func (c *memClock) now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// pass moves the clock by d, as time passing with nothing waiting.
func (c *memClock) pass(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at += d
}

// pauses returns the waits recorded so far.
func (c *memClock) pauses() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// memEnv is sysEnv with its clock, its waits and its draws replaced: a
// sleep whose context and quit are live returns wakeTimer at once, the
// clock moved by its delay; a round waits until decided; a draw is the
// largest it may be.
type memEnv struct {
	sysEnv
	clk *memClock
}

func (e memEnv) now() time.Time { return e.clk.base.Add(e.clk.now()) }

// await waits for the round to be decided, whatever its timeout: the
// masters answer every command at once, and a round that a loaded
// machine slowed past MasterTimeout must not fail (and back off) here.
func (memEnv) await(ctx context.Context, r *quorum.Round, _ time.Duration) quorum.Result {
	return r.Wait(ctx, time.Minute)
}

// intN draws the largest value, n−1: a jittered wait is at its longest.
func (memEnv) intN(n int64) int64 { return n - 1 }

// endedBefore reports the wakeup of a sleep that ends before it begins:
// its context or quit already ended, or woken already closed.
func endedBefore(ctx, quit context.Context, woken <-chan struct{}) (wakeup, bool) {
	switch {
	case ctx.Err() != nil:
		return wakeCtx, true
	case quit.Err() != nil:
		return wakeClosed, true
	}
	select {
	case <-woken:
		return wakeWoken, true
	default:
		return wakeTimer, false
	}
}

func (e memEnv) sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, _ **time.Timer) wakeup {
	if w, ended := endedBefore(ctx, quit, woken); ended {
		return w
	}
	if quit == context.Background() {
		e.clk.mu.Lock()
		e.clk.bg = append(e.clk.bg, delay)
		e.clk.mu.Unlock()
		// A wait that Close does not end is the Locker's own (the
		// waker's sweep, Shutdown's and an operation's wait for its
		// releases): it waits for its event, and moves no clock. Taken
		// at once, the sweep's loop would spin the clock forward by
		// hours while a test's caller waits, and expire what it holds.
		select {
		case <-ctx.Done():
			return wakeCtx
		case <-woken:
			return wakeWoken
		}
	}
	if e.clk.settle != nil {
		e.clk.settle()
	}
	e.clk.mu.Lock()
	if e.clk.max > 0 && len(e.clk.log) >= e.clk.max {
		e.clk.mu.Unlock()
		return wakeCtx
	}
	e.clk.at += delay
	e.clk.log = append(e.clk.log, delay)
	e.clk.mu.Unlock()
	return wakeTimer
}

// simDriver is one simulated master on the client path. refuse, when it
// returns true for a command, makes the master answer it with an error
// reply (refusal, or "ERR refused by the test") instead of running it.
// It never fails a batch: a lost connection would start the Locker's
// reconnects, whose waits memEnv does not take.
type simDriver struct {
	mu      sync.Mutex
	m       *sim.Master
	clk     *memClock
	addr    string
	refuse  func(args []string) bool
	refusal string
}

// refuseWith sets refuse and refusal (nil: run every command).
func (f *simDriver) refuseWith(refusal string, refuse func(args []string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusal, f.refuse = refusal, refuse
}

func (f *simDriver) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Duration(f.clk.base.UnixNano()) + f.clk.now()
	out := make([]driver.Reply, len(cmds))
	for i, args := range cmds {
		if f.refuse != nil && f.refuse(args) {
			out[i] = driver.Reply{Kind: driver.ReplyError, Text: cmp.Or(f.refusal, "ERR refused by the test")}
			continue
		}
		r := f.m.Do(now, args)
		out[i] = driver.Reply{Kind: driver.ReplyKind(r.Kind), Int: r.Int, Text: r.Text}
		if r.Kind == sim.Array {
			out[i].Kind = driver.ReplyOther
		}
	}
	return out, nil
}

func (f *simDriver) Addr() string { return f.addr }

// run runs one command on the master, as a test reads or changes it.
func (f *simDriver) run(args ...string) sim.Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Do(time.Duration(f.clk.base.UnixNano())+f.clk.now(), args)
}

// simDriverLocker is a Locker over n simDrivers on one memClock.
func simDriverLocker(t *testing.T, n int, o *Options) (*Locker, []*simDriver, *memClock) {
	t.Helper()
	return simDriverLockerWith(t, n, o, func(c *memClock) env { return memEnv{clk: c} })
}

// simDriverLockerWith is simDriverLocker with the env envOf makes.
func simDriverLockerWith(t *testing.T, n int, o *Options, envOf func(*memClock) env) (*Locker, []*simDriver, *memClock) {
	t.Helper()
	scripts, err := simScripts()
	if err != nil {
		t.Fatal(err)
	}
	clk := &memClock{base: time.Now()}
	ms := make([]*simDriver, n)
	dm := make([]driver.Master, n)
	for i := range ms {
		ms[i] = &simDriver{m: sim.New("m"+string(rune('0'+i)), scripts), clk: clk, addr: "mem" + string(rune('0'+i))}
		dm[i] = ms[i]
	}
	l, err := newLocker(dm, o, envOf(clk), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.settle = func() { flush(l) }
	t.Cleanup(func() { l.Close() })
	return l, ms, clk
}

// flush returns once every master has run what l sent it so far: a round
// of PTTLs that waits for every master's answer, each master's stream
// running its commands in order. What a round that does not wait sent
// (a leave) has run by then.
func flush(l *Locker) {
	l.roundFor(context.Background(), l.env.now(), true, time.Minute, len(l.streams), func(c *cmd) bool {
		c.kind, c.key = cmdProbe, flushKey
		return true
	})
}

const flushKey = "mem:flush"

// eventually fails t, naming what, unless cond holds within 10s: a
// goroutine of the Locker's reaching a state the test waits for.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// sha is the SHA1 the masters know the named script of redlock/scripts by.
func sha(t *testing.T, name string) string {
	t.Helper()
	scripts, err := simScripts()
	if err != nil {
		t.Fatal(err)
	}
	s := scripts.SHA(name)
	if s == "" {
		t.Fatalf("no script %s", name)
	}
	return s
}

// isScript reports whether args run the script of SHA1 s (EVALSHA).
func isScript(args []string, s string) bool {
	return len(args) > 1 && (args[0] == "EVALSHA" || args[0] == "evalsha") && args[1] == s
}

// limit makes the clock's sleeps past the first n end as if their
// context had (wakeCtx), unrecorded: a call that pauses without end stops.
func (c *memClock) limit(n int) *memClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = n
	return c
}
