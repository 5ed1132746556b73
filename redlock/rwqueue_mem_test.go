package redlock

import (
	"context"
	"testing"
	"time"
)

// Two writers of two Lockers wait in the masters' queue while a reader
// holds; the drain wakes both (one per Locker). The one behind is refused
// by its place (rw_write.lua), not granted, and goes next: its Lock
// returns after the head's Unlock, woken by that release's hand-on, with
// no timer fired (in a memWorld; rwqueue_test.go keeps the check on real
// masters of what the woken writer's round executes).
func TestRWMutexWriterBehindInQueueGoesNext(t *testing.T) {
	w := newMemWorld(t, 3)
	opts := &Options{TTL: 30 * time.Second, Retry: memMinuteRetry}
	la, _ := w.locker(opts)
	lb, _ := w.locker(opts)
	a, _ := la.RWMutex("cache")
	b, _ := lb.RWMutex("cache")
	ctx := t.Context()
	r, err := a.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const wkey = "redlock:{cache}:w"
	lock := func(rw *RWMutex) <-chan memResult {
		got := make(chan memResult, 1)
		go func() {
			lk, err := rw.Lock(ctx)
			got <- memResult{lk, err}
		}()
		return got
	}
	gotA := lock(a)
	w.sleeping(1)
	w.advance(time.Millisecond) // B begins after A: the queue's order
	gotB := lock(b)
	w.sleeping(2)
	if !w.queued(wkey, 2) {
		t.Fatalf("want both writers queued on every master:%s", w.state(wkey))
	}
	w.subscribed(la, wkey)
	w.subscribed(lb, wkey)
	w.releases(r)
	lkA := lockOf(t, gotA, "the writer at the head")
	// Both Lockers heard the drain; the second writer stays in the queue.
	w.sleeping(1)
	if !w.queued(wkey, 1) {
		t.Fatalf("the head left; want the second writer still queued:%s", w.state(wkey))
	}
	if len(gotB) != 0 {
		res := <-gotB
		t.Fatalf("the second writer got the lock while the first held: %v, %v", res.lk, res.err)
	}
	unlocked := w.clk.base.Add(w.clk.now())
	w.advance(time.Millisecond)
	w.releases(lkA)
	lkB := lockOf(t, gotB, "the second writer")
	if !lkB.Acquisition().Start.After(unlocked) {
		t.Fatalf("the second writer's granting round started at %v, before the first's Unlock at %v", lkB.Acquisition().Start, unlocked)
	}
	if err := lkB.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.flush()
	if !w.queued(wkey, 0) {
		t.Errorf("want no queue left:%s", w.state(wkey))
	}
}
