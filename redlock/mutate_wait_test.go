package redlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The wait's driver (wait.go) on in-memory masters: which target waits
// how, who joins and leaves the masters' queue, and what a lock taken
// after a wait carries into its release. Its conditions lived mutated
// against the simulator, whose waiters still acquire by polling when the
// queue misleads them.

// cmdLog records every command each master was sent, in order.
type cmdLog struct {
	mu   sync.Mutex
	sent [][][]string // by master
}

// spy makes log record what each of ms is sent.
func spy(ms []*simDriver) *cmdLog {
	log := &cmdLog{sent: make([][][]string, len(ms))}
	for i, m := range ms {
		m.refuseWith("", func(args []string) bool {
			if len(args) == 2 && args[1] == flushKey {
				return false
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			log.sent[i] = append(log.sent[i], slices.Clone(args))
			return false
		})
	}
	return log
}

// count is how many commands master i was sent that match.
func (c *cmdLog) count(i int, match func(args []string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, args := range c.sent[i] {
		if match(args) {
			n++
		}
	}
	return n
}

// total is how many commands every master was sent.
func (c *cmdLog) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sent {
		n += len(s)
	}
	return n
}

// first and last are the first and the last command master i was sent
// that matches, or nil.
func (c *cmdLog) first(i int, match func(args []string) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, args := range c.sent[i] {
		if match(args) {
			return args
		}
	}
	return nil
}

func (c *cmdLog) last(i int, match func(args []string) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, args := range slices.Backward(c.sent[i]) {
		if match(args) {
			return args
		}
	}
	return nil
}

func isLeave(args []string) bool { return len(args) > 0 && args[0] == "ZREM" }

// A writer that waited and then took the write lock on a majority leaves
// the queue only where its round did not grant: its grant took it off
// the others (docs/design.md §14.1, §19). Its wait polls for the holder's
// expiry (another writer holds the key on a majority) instead of retrying
// on its backoff.
func TestMutateWriterLeavesWhereNotGranted(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{TTL: time.Second})
	rw, err := l.RWMutex("d")
	if err != nil {
		t.Fatal(err)
	}
	key := rw.target(modeWriteWait).key
	for i, m := range ms {
		life := "300"
		if i == 2 {
			life = "100000" // master 2 refuses the writer's round that wins
		}
		m.run("SET", key, "another-writer", "PX", life)
	}
	log := spy(ms)
	write := sha(t, "rw_write.lua")
	lk, err := rw.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	flush(l)
	for i := range ms {
		want := 0
		if i == 2 {
			want = 1
		}
		if n := log.count(i, isLeave); n != want {
			t.Errorf("master %d was sent %d leaves, want %d (only where the winning round did not grant)", i, n, want)
		}
		if n := ms[i].run("ZCARD", key+queueSuffix).Int; n != 0 {
			t.Errorf("master %d still queues %d waiters", i, n)
		}
	}
	// Held by another writer on a majority: one round, a poll, one
	// round at the holder's expiry.
	if n := log.count(0, func(a []string) bool { return isScript(a, write) }); n > 2 {
		t.Errorf("the writer made %d rounds, want 2 (a held key is polled for its expiry, not retried on the backoff)", n)
	}
}

// A waiter of a mutex makes its round, joins the masters' queue and polls;
// a lock it then takes carries its queue member into its release, which
// takes the member off where a late join may have put it back.
func TestMutateWaitedLockReleasesItsMember(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{TTL: time.Second})
	tg, err := l.target("q")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.run("SET", tg.key, "someone", "PX", "300")
	}
	log := spy(ms)
	join, release := sha(t, "join.lua"), sha(t, "release.lua")
	lk, err := l.Lock(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	flush(l)
	for i := range ms {
		j := log.first(i, func(a []string) bool { return isScript(a, join) })
		r := log.last(i, func(a []string) bool { return isScript(a, release) })
		if j == nil || r == nil {
			t.Fatalf("master %d: join %q, release %q: want both", i, j, r)
		}
		// join: EVALSHA sha 1 queue age member ...; release: EVALSHA
		// sha 2 key queue token member ...
		if strings.Contains(j[5], " ") {
			t.Errorf("master %d: the waiter joined as %q, asking to be handed the key, with no subscription to hear it", i, j[5])
		}
		if len(r) < 7 || r[6] != j[5] {
			t.Errorf("master %d: the release of a lock taken after a wait is %q, want it to carry the waiter's member %q", i, r[3:], j[5])
		}
	}
}

// gateEnv is memEnv whose callers' sleeps last until their context ends,
// a wake, or Close: the test chooses who waits while another starts.
type gateEnv struct {
	memEnv
	asleep *atomic.Int64 // callers in a sleep now
}

func (e gateEnv) sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, t **time.Timer) wakeup {
	if quit == context.Background() {
		return e.memEnv.sleep(ctx, quit, delay, woken, t)
	}
	e.asleep.Add(1)
	defer e.asleep.Add(-1)
	select {
	case <-ctx.Done():
		return wakeCtx
	case <-quit.Done():
		return wakeClosed
	case <-woken:
		return wakeWoken
	}
}

// A second caller of a Locker for a mutex that one of its callers already
// waits for waits behind it, making no round and joining no queue
// (docs/design.md §14 item 3); a reader does not wait behind anyone.
func TestMutateSecondWaiterWaitsBehind(t *testing.T) {
	for _, reader := range []bool{false, true} {
		asleep := new(atomic.Int64)
		l, ms, _ := simDriverLockerWith(t, 3, &Options{TTL: time.Second}, func(c *memClock) env { return gateEnv{memEnv{clk: c}, asleep} })
		rw, err := l.RWMutex("b")
		if err != nil {
			t.Fatal(err)
		}
		lock, key := func(ctx context.Context) { l.Lock(ctx, "b") }, "redlock:{b}"
		if reader {
			lock, key = func(ctx context.Context) { rw.RLock(ctx) }, rw.target(modeWriteWait).key
		}
		for _, m := range ms {
			m.run("SET", key, "holder", "PX", "100000")
		}
		log := spy(ms)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		started := func(n int64) {
			wg.Go(func() { lock(ctx) })
			eventually(t, "the waiter asleep", func() bool { return asleep.Load() >= n })
			flush(l) // what it sent before it slept has run
		}
		started(1)
		before := log.total()
		started(2)
		sent := log.total() - before
		cancel()
		wg.Wait()
		if reader && sent == 0 {
			t.Error("a second reader waited behind the first without a round of its own")
		}
		if !reader && sent != 0 {
			t.Errorf("a second waiter of the Locker sent %d commands before it waited, want none (it waits behind the first)", sent)
		}
	}
}
