package redlock

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
