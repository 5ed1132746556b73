package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// The waker's bookkeeping, driven by hand: the announcements a master
// makes (released), who is woken and when, and the lines of waiters
// (wake.go's conditions lived mutated against the simulator, where a wake
// missed or doubled only moves a waiter to its backoff).

// woken reports whether x has a wake pending, and takes it.
func woken(x *waiter) bool {
	select {
	case <-x.ch:
		return true
	default:
		return false
	}
}

// A release that names nobody wakes the first waiter of the key once a
// majority of masters announced it, and only it; one that names a waiter
// of this Locker wakes it on the first announcement, and again on the
// majority's when its round failed meanwhile (wakeOnMajority); one that
// names a waiter that has left counts as naming nobody.
func TestMutateWakerAnnouncements(t *testing.T) {
	l, _, clk := simDriverLocker(t, 3, nil) // a majority is 2
	w := l.wake
	tg, _ := l.target("k")
	a, b := w.wait(tg), w.wait(tg)
	if w.subs == nil {
		t.Error("the first waiter did not start the waker's subscriptions")
	}
	t0 := l.env.now()
	clk.pass(time.Millisecond)

	w.released(0, tg.key, "d1")
	if woken(a) || woken(b) || w.freedSince(tg, t0) != true {
		t.Error("one master's announcement woke a waiter, or was not noted as a release")
	}
	w.released(1, tg.key, "d1")
	if !woken(a) || woken(b) || w.woken.Load() != 1 {
		t.Errorf("a majority's announcement: first woken %v, second woken %v, %d wakes; want the first only", len(a.ch), len(b.ch), w.woken.Load())
	}

	// Named: woken on the first announcement; a duplicate is ignored.
	w.released(2, tg.key, "d2 "+a.id)
	w.released(2, tg.key, "d2 "+a.id)
	if !woken(a) || woken(b) {
		t.Error("a release naming the first waiter did not wake it alone on its first announcement")
	}
	if now, later := w.wakeOnMajority(a); now || !later {
		t.Errorf("wakeOnMajority after one master named it: %v, %v; want a wake later", now, later)
	}
	w.released(2, tg.key, "d2 "+a.id) // the same master again: not a majority
	if woken(a) {
		t.Error("one master's repeated announcement counted as a majority")
	}
	w.released(0, tg.key, "d2 "+a.id)
	if !woken(a) {
		t.Error("the majority's announcement did not wake the waiter again after its failed round")
	}
	if now, later := w.wakeOnMajority(a); !now || later {
		t.Errorf("wakeOnMajority after a majority named it: %v, %v; want now", now, later)
	}
	if now, later := w.wakeOnMajority(b); now || later {
		t.Errorf("wakeOnMajority of a waiter never named: %v, %v; want neither", now, later)
	}

	// A waiter of this Locker named after it left: as naming nobody.
	w.released(0, tg.key, "d3 "+w.id+".ghost")
	w.released(1, tg.key, "d3 "+w.id+".ghost")
	if !woken(a) || woken(b) {
		t.Error("a release naming a waiter that left, announced by a majority, did not wake the first waiter alone")
	}

	// Releases that never reach a majority are forgotten past 64 of them,
	// not at 64.
	for i := range 64 {
		w.released(0, tg.key, fmt.Sprintf("p%d", i))
	}
	w.released(1, tg.key, "p0")
	if !woken(a) {
		t.Error("a release's second announcement, with 64 pending, did not wake the first waiter")
	}
}

// The line of a Locker's waiters: the first polls, the others wait their
// turn; a waiter that leaves with a wake it did not use passes it on, and
// one without does not; a recent hand-off of the key is noted for maxAge.
func TestMutateWakerLine(t *testing.T) {
	l, _, clk := simDriverLocker(t, 3, nil)
	w := l.wake
	tg, _ := l.target("line")
	a, b := w.wait(tg), w.wait(tg)
	if !w.first(a) || w.first(b) {
		t.Errorf("first: %v and %v, want the first waiter only", w.first(a), w.first(b))
	}
	if n := w.waiting.Load(); n != 2 {
		t.Fatalf("%d waiting, want 2", n)
	}
	w.done(a) // no wake pending
	if woken(b) {
		t.Error("a waiter leaving without a wake woke the next")
	}
	if n, q := w.waiting.Load(), w.queues[tg.key]; n != 1 || q.has(a.id) || !q.has(b.id) {
		t.Errorf("after the first left: %d waiting, first in line %v, second %v; want 1, false, true", n, q.has(a.id), q.has(b.id))
	}
	if !w.first(b) {
		t.Error("the second waiter, now alone, is not first")
	}
	c := w.wait(tg)
	b.wake()
	w.done(b) // with its wake unused: it goes to c
	if !woken(c) {
		t.Error("a waiter leaving with an unused wake did not pass it on")
	}
	w.done(c)
	if q := w.queues[tg.key]; len(q.waiters) != 0 || q.idleSince.IsZero() {
		t.Errorf("after every waiter left: %d in line, idle since %v; want none, now", len(q.waiters), q.idleSince)
	}

	w.handed(tg.key)
	clk.pass(10 * time.Millisecond)
	l2, _, _ := simDriverLocker(t, 3, nil)
	if l2.wake.handed(tg.key); l2.wake.subs == nil {
		t.Error("a hand-off noted by a Locker with no waiter did not start its subscriptions")
	}
	if w.handingOn(tg, 10*time.Millisecond) || !w.handingOn(tg, 10*time.Millisecond+1) {
		t.Error("handingOn: a hand-off 10ms ago is recent within 10ms+1ns, and not within 10ms")
	}
}

// An observer's channel stays subscribed while another watcher watches
// it, and goes with the last.
func TestMutateWatchers(t *testing.T) {
	l, _, _ := simDriverLocker(t, 3, nil)
	x, y := l.watch("ch"), l.watch("ch")
	if l.wake.subs == nil {
		t.Error("the first watcher did not start the waker's subscriptions")
	}
	x.stop()
	if got := l.wake.watched["ch"]; len(got) != 1 || got[0] != y {
		t.Errorf("after one of two watchers stopped: %v watch, want the other", got)
	}
	y.stop()
	if _, ok := l.wake.watched["ch"]; ok {
		t.Error("a channel nobody watches stays watched")
	}
}

// A writer's release, announced by a majority, wakes every reader waiting
// for it, each counted.
func TestMutateWakerReaders(t *testing.T) {
	l, _, _ := simDriverLocker(t, 3, nil)
	rw, _ := l.RWMutex("r")
	r1, r2 := l.wake.wait(rw.target(modeRead)), l.wake.wait(rw.target(modeRead))
	key := rw.target(modeWriteWait).key
	l.wake.released(0, key, "dw")
	l.wake.released(1, key, "dw")
	if !woken(r1) || !woken(r2) || l.wake.woken.Load() != 2 {
		t.Errorf("a writer's release woke readers %v and %v, %d wakes counted; want both, 2", len(r1.ch), len(r2.ch), l.wake.woken.Load())
	}
}

// A go-redis master has a subscription connection to share (none is made
// until a channel is subscribed); a master on the client path has one
// only when it is a Subscriber.
func TestMutateSubscribe(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer cl.Close()
	ps := subscribe(t.Context(), cl, nil)
	if ps == nil {
		t.Fatal("a go-redis master has no subscription connection")
	}
	ps.Close()
	if ps := subscribe(t.Context(), nil, &simDriver{}); ps != nil {
		t.Error("a master on the client path that is not a Subscriber has a subscription connection")
	}
}

// fakePubSub is a subscription connection that records what it is asked
// and fails when told to.
type fakePubSub struct {
	mu          sync.Mutex
	subs, unsub [][]string
	fail        bool
	ch          chan *redis.Message
}

func (f *fakePubSub) Subscribe(_ context.Context, channels ...string) error {
	return f.ask(&f.subs, channels)
}

func (f *fakePubSub) Unsubscribe(_ context.Context, channels ...string) error {
	return f.ask(&f.unsub, channels)
}

// ask records channels in asked, and fails when told to.
func (f *fakePubSub) ask(asked *[][]string, channels []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*asked = append(*asked, channels)
	if f.fail {
		return errors.New("fakePubSub: refused")
	}
	return nil
}

func (f *fakePubSub) Channel(...redis.ChannelOption) <-chan *redis.Message { return f.ch }
func (f *fakePubSub) Close() error                                         { return nil }

// afterEnv is memEnv that records the delays of afterFunc, whose
// functions never run: the test calls what they would.
type afterEnv struct {
	memEnv
	mu    *sync.Mutex
	after *[]time.Duration
}

func (e afterEnv) afterFunc(d time.Duration, _ func()) stopper {
	e.mu.Lock()
	*e.after = append(*e.after, d)
	e.mu.Unlock()
	return neverStopper{}
}

type neverStopper struct{}

func (neverStopper) Stop() bool { return true }

// A subscriber follows the keys waited for: it subscribes each key's
// channel and this Locker's own, in one call, only when there is
// something to change, and unsubscribes once the key has been idle for
// lingerFor (the sweep, every half of it); a master that refuses is asked
// again half a lingerFor later, and what it refused is not counted as
// subscribed. pump does the subscriber's work for a detached Locker:
// the change asked for, then the announcements.
func TestMutateSubscriptions(t *testing.T) {
	var mu sync.Mutex
	var after []time.Duration
	l, _, clk := simDriverLockerWith(t, 3, nil, func(c *memClock) env { return afterEnv{memEnv{clk: c}, &mu, &after} })
	w := l.wake
	ps := &fakePubSub{ch: make(chan *redis.Message, 4)}
	s := &subscriber{ps: ps, notify: make(chan struct{}, 1), have: map[string]bool{}}
	tg, _ := l.target("s")
	x := w.wait(tg)
	var bg []time.Duration
	eventually(t, "the first waiter's sweep asleep", func() bool {
		clk.mu.Lock()
		defer clk.mu.Unlock()
		bg = slices.Clone(clk.bg)
		return len(bg) > 0
	})
	if bg[0] != lingerFor/2 {
		t.Errorf("the sweep sleeps %v between its rounds, want %v", bg[0], lingerFor/2)
	}
	w.mu.Lock()
	w.subs = []*subscriber{s} // this test's subscriber only
	w.mu.Unlock()
	want := []string{tg.key, w.channel(tg.key)}
	slices.Sort(want)

	w.reconcile(s)
	w.reconcile(s) // nothing changed: nothing asked
	if len(ps.subs) != 1 || !slices.Equal(ps.subs[0], want) || len(ps.unsub) != 0 || !s.have[want[0]] || !s.have[want[1]] {
		t.Fatalf("reconcile with one key waited for: subscribed %q, unsubscribed %q, have %v; want %q once", ps.subs, ps.unsub, s.have, want)
	}

	// pump: the change a new key asks for, then an announcement.
	tg2, _ := l.target("s2")
	y := w.wait(tg2)
	ps.ch <- &redis.Message{Channel: tg.key, Payload: "d"}
	w.pump()
	w.released(1, tg.key, "d")
	want2 := []string{tg2.key, w.channel(tg2.key)}
	slices.Sort(want2)
	if len(ps.subs) != 2 || !slices.Equal(ps.subs[1], want2) || !woken(x) {
		t.Errorf("pump: subscribed %q, first waiter woken %v; want %q subscribed, and the announcement counted", ps.subs, len(x.ch), want2)
	}
	w.done(x)
	w.done(y)
	want = append(want, want2...)
	slices.Sort(want)

	clk.pass(lingerFor - 1)
	w.sweepOnce()
	if _, ok := w.queues[tg.key]; !ok || w.keys.Load() != 2 {
		t.Fatalf("keys idle for lingerFor−1ns were forgotten (%d keys left)", w.keys.Load())
	}
	clk.pass(1)
	w.sweepOnce()
	if _, ok := w.queues[tg.key]; ok || w.keys.Load() != 0 {
		t.Fatalf("keys idle for lingerFor are still followed (%d keys)", w.keys.Load())
	}
	ps.fail = true
	w.reconcile(s)
	if len(ps.unsub) != 1 || !slices.Equal(ps.unsub[0], want) || !s.have[want[0]] {
		t.Errorf("a refused unsubscribe: asked %q, have %v; want %q asked and still counted as subscribed", ps.unsub, s.have, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(after, lingerFor/2) {
		t.Errorf("a refused change was asked again after %v, want %v", after, lingerFor/2)
	}
	ps.fail = false
	w.reconcile(s)
	if len(s.have) != 0 {
		t.Errorf("after the master answered again, still subscribed to %v", s.have)
	}
	// An observer's channel alone, with no key waited for.
	l.watch("obs")
	w.reconcile(s)
	if last := ps.subs[len(ps.subs)-1]; !slices.Equal(last, []string{"obs"}) {
		t.Errorf("a watcher's channel alone: subscribed %q, want obs", last)
	}
}

// detachedEnv is afterEnv for a detached Locker (the simulator's): the
// waker starts no goroutine, and sweeps on the env's timers.
type detachedEnv struct{ afterEnv }

func (detachedEnv) detached() bool { return true }

// A detached Locker's waker sweeps on its timers, every half lingerFor,
// from its start and after each sweep.
func TestMutateDetachedSweep(t *testing.T) {
	var mu sync.Mutex
	var after []time.Duration
	e := detachedEnv{afterEnv{memEnv{clk: &memClock{base: time.Now()}}, &mu, &after}}
	l := &Locker{env: e, masters: make([]redis.UniversalClient, 3), given: make([]driver.Master, 3)}
	w := newWaker(l.env, l.masters, l.given, l.need)
	l.wake = w
	w.mu.Lock()
	w.startLocked()
	w.mu.Unlock()
	w.sweepTick()
	w.close()
	mu.Lock()
	defer mu.Unlock()
	if len(after) != 2 || after[0] != lingerFor/2 || after[1] != lingerFor/2 {
		t.Errorf("a detached waker's sweeps were set %v apart, want %v from its start and after each", after, lingerFor/2)
	}
}
