package redlock

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// When the keeper first extends a kept lock (Lock.extendInLocked), on
// in-memory masters (simDriver): with a third of the window left, or three
// recent p99 round times when more; no sooner than a tenth of the window
// or half the time left; and halfway to the loss timer's instant when the
// wait would reach it (keep.go and pace.go: the schedule's arithmetic
// lived, and kept seed 1042's fix has its proof here besides the
// simulator).
func TestMutateKeepFirstExtension(t *testing.T) {
	l, lk := heldLock(t, time.Second)
	w, lead := lk.budget.Window(), lk.leadLocked()
	if lead != 10*time.Millisecond {
		t.Fatalf("loss lead %v with a window of %v, want 10ms", lead, w)
	}
	at := func(left time.Duration) time.Duration {
		lk.deadline = l.env.now().Add(left)
		return lk.extendInLocked()
	}
	within := func(what string, got, lo, hi time.Duration) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s: first extension in %v, want in [%v, %v] (window %v)", what, got, lo, hi, w)
		}
	}
	// No round recorded yet: the lead is a third of the window, and the
	// jitter (memEnv draws its largest) a thirtieth.
	within("a whole window left", at(w), w-w/3-w/30, w-w/3-w/30)
	within("half the window left", at(w/2), w/2-w/3-w/30, w/2-w/3-w/30)
	for _, c := range []struct {
		left, want time.Duration
		why        string
	}{
		{w / 6, w / 12, "under a fifth of the window left: half of it"},
		{25 * time.Millisecond, 12500 * time.Microsecond, "25ms left: half of it, before the loss instant at 15ms"},
		{16800 * time.Microsecond, 3400 * time.Microsecond, "16.8ms left: halfway to the loss instant at 6.8ms"},
		{2 * lead, lead / 2, "twice the loss lead left: half of it would be the loss instant; halfway there"},
		{lead, 0, "the loss lead left: at once"},
		{lead / 2, 0, "less than the loss lead left: at once"},
	} {
		if got := at(c.left); got != c.want {
			t.Errorf("%v left (%s): first extension in %v, want %v", c.left, c.why, got, c.want)
		}
	}
	// Slow rounds: three p99s ahead when that is more than a third.
	for range paceSamples {
		l.pace.record(200 * time.Millisecond)
	}
	within("a whole window left, rounds of 200ms", at(w), w-600*time.Millisecond-w/30, w-600*time.Millisecond-w/30)
}

// The loss timer's lead is 10ms, or a tenth of the window when less
// (keep.go: `Window()/10` made `*10` lived).
func TestMutateLossLead(t *testing.T) {
	_, lk := heldLock(t, 50*time.Millisecond)
	if w, got := lk.budget.Window(), lk.leadLocked(); got != w/10 || got >= 10*time.Millisecond {
		t.Errorf("loss lead %v with a window of %v, want a tenth of it", got, w)
	}
}

// heldLock is a lock of ttl on in-memory masters (simDriver) with its
// mutex held until the test ends, then unlocked.
func heldLock(t *testing.T, ttl time.Duration) (*Locker, *Lock) {
	t.Helper()
	l, _, _ := simDriverLocker(t, 3, &Options{TTL: ttl})
	lk, err := l.TryLock(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	lk.mu.Lock()
	t.Cleanup(func() {
		lk.mu.Unlock()
		lk.Unlock(context.Background())
	})
	return l, lk
}

// A lifetime's loss timer, on an env whose timers never fire: a lock is
// lost a lead before its deadline. Made at that instant, its context is
// born ended; made before it and asked again (Context, Keep) at that
// instant, it lapses then; a Keep on a lifetime whose context ended does
// not join the keeper.
func TestMutateKeepingLapses(t *testing.T) {
	var mu sync.Mutex
	var after []time.Duration
	locker := func(t *testing.T) (*Lock, *memClock) {
		l, _, clk := simDriverLockerWith(t, 3, &Options{TTL: time.Second}, func(c *memClock) env { return afterEnv{memEnv{clk: c}, &mu, &after} })
		lk, err := l.TryLock(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.Unlock(context.Background()) })
		return lk, clk
	}
	lossAt := func(lk *Lock) time.Duration {
		lk.mu.Lock()
		defer lk.mu.Unlock()
		return lk.deadline.Sub(lk.locker.env.now()) - lk.leadLocked()
	}

	lk, clk := locker(t)
	clk.pass(lossAt(lk))
	if lk.Context().Err() == nil {
		t.Error("a context made at the instant its lock is lost is live")
	}

	lk, clk = locker(t)
	ctx := lk.Context()
	clk.pass(lossAt(lk) - 1)
	if lk.Context(); ctx.Err() != nil {
		t.Fatal("a lock lapsed 1ns before its loss instant")
	}
	clk.pass(1)
	if lk.Context(); ctx.Err() == nil {
		t.Error("a lock asked for its context at its loss instant (its timer late) did not lapse")
	}

	lk, _ = locker(t)
	lk.Context()
	lk.Unlock(t.Context())
	if err := lk.Keep(); err == nil {
		t.Error("Keep of an unlocked lock succeeded")
	}
	lk.mu.Lock()
	joined := lk.held.joined
	lk.mu.Unlock()
	if joined {
		t.Error("a Keep on a lifetime whose context ended joined the keeper")
	}
}

// A successful Extend moves the loss timer to the new deadline less the
// lead; one that leaves no more than the lead (its round took the rest of
// the window) declares the lock lost at once.
func TestMutateExtendRearms(t *testing.T) {
	var mu sync.Mutex
	var after []time.Duration
	l, ms, clk := simDriverLockerWith(t, 3, &Options{TTL: time.Second}, func(c *memClock) env { return afterEnv{memEnv{clk: c}, &mu, &after} })
	lk, err := l.TryLock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	ctx := lk.Context()
	clk.pass(100 * time.Millisecond)
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	lk.mu.Lock()
	want := lk.deadline.Sub(l.env.now()) - lk.leadLocked()
	window, lead := lk.budget.Window(), lk.leadLocked()
	lk.mu.Unlock()
	mu.Lock()
	got := after[len(after)-1]
	mu.Unlock()
	if got != want {
		t.Errorf("after an Extend the loss timer is set %v ahead, want %v (the new deadline less the lead)", got, want)
	}

	// The extension's round takes the window less the lead: it succeeds
	// with the lead left, and the lock is lost then.
	extend := sha(t, "extend.lua")
	var once sync.Once
	for _, m := range ms {
		m.refuseWith("", func(a []string) bool {
			if isScript(a, extend) {
				once.Do(func() { clk.pass(window - lead) })
			}
			return false
		})
	}
	lk.Extend(t.Context())
	if ctx.Err() == nil {
		t.Error("an Extend that left only the lead did not end the lock's context")
	}
}

// The keeper's plan takes the earliest extension due first.
func TestMutateDueHeap(t *testing.T) {
	var d dueHeap
	for _, at := range []time.Duration{3, 1, 4, 2} {
		heap.Push(&d, dueItem{at: at})
	}
	var got []time.Duration
	for d.Len() > 0 {
		got = append(got, heap.Pop(&d).(dueItem).at)
	}
	if !slices.Equal(got, []time.Duration{1, 2, 3, 4}) {
		t.Errorf("the keeper's plan gave %v, want the earliest first", got)
	}
}

// The keeper's goroutine ends when the last kept lock leaves it, not at
// its next planned extension.
func TestMutateKeeperEndsWithTheLast(t *testing.T) {
	asleep := new(atomic.Int64)
	l, _, _ := simDriverLockerWith(t, 3, &Options{TTL: 10 * time.Second}, func(c *memClock) env { return gateEnv{memEnv{clk: c}, asleep} })
	lk, err := l.TryLock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Keep(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the keeper waiting for the extension's instant", func() bool { return asleep.Load() >= 1 })
	lk.Unlock(t.Context())
	k := &l.keeper
	eventually(t, "the keeper's goroutine ended after the last kept lock left (its next extension is due in seconds of its clock, which stands still)", func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return !k.running
	})
}

// spawnCounter is memEnv whose spawned goroutines are counted, not run.
type spawnCounter struct {
	memEnv
	n *int
}

func (e spawnCounter) spawn(func()) { *e.n++ }

// The keeper starts one worker per lock extended alone and one per batch
// of up to keepBatch, up to keepWorkers in all.
func TestMutateKeeperWorkers(t *testing.T) {
	for _, c := range []struct{ ready, head, batch, bhead, want int }{
		{3, 0, 0, 0, 3},
		{5, 3, 0, 0, 2}, // three taken already
		{0, 0, keepBatch + 1, 0, 2},
		{0, 0, keepBatch + 3, 3, 1},
		{1, 0, keepBatch, 0, 2},
		{keepWorkers + 5, 0, 0, 0, keepWorkers},
	} {
		n := 0
		k := &keeper{env: spawnCounter{n: &n}, ready: make([]*lifetime, c.ready), head: c.head, batch: make([]*lifetime, c.batch), bhead: c.bhead}
		k.startWorkersLocked()
		if n != c.want || k.workers != c.want {
			t.Errorf("%d due alone and %d batched pending: %d workers started, want %d", c.ready-c.head, c.batch-c.bhead, n, c.want)
		}
	}
}

// A batched extension's wait ends once every lock in it is decided: each
// has a majority of masters that extended it, or too few masters are left
// unanswered for it to get one, and not before (keeper.go: the count of
// extBatch.answered made `c <= need` or `c+open > need`, lived). Five
// masters, two locks, answers in a chosen order; decided reports after
// which answer the wait ended.
func TestMutateBatchDecided(t *testing.T) {
	cases := []struct {
		name    string
		answers []string // master i's flags, in order; "" is a failed answer
		decided int      // answers counted when the wait ends (0: never)
	}{
		{"both locks on a majority", []string{"11", "11", "11", "00", "00"}, 3},
		{"one on a majority, the other out of reach", []string{"11", "10", "00", "10", "01"}, 4},
		{"the second lock can still reach three", []string{"11", "11", "10", "00", "01"}, 5},
		{"the second lock cannot reach three", []string{"11", "11", "10", "00", "00"}, 5},
		{"no lock can reach three", []string{"00", "00", "00"}, 3},
		{"failed answers count as not extended", []string{"", "", "11", "11", "11"}, 5},
		{"a lock on a majority waits for the other", []string{"11", "11", "10", "01"}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &extBatch{keys: []string{"a", "b"}, need: 3}
			decided := 0
			counted := 0
			b.begin(5, func(error) {
				if decided == 0 {
					decided = counted
				}
			})
			for node, flags := range tc.answers {
				counted++
				if flags != "" {
					b.record(node, flags)
				}
				b.answered(node, flags != "")
			}
			if decided != tc.decided {
				t.Errorf("the wait ended after answer %d, want %d", decided, tc.decided)
			}
		})
	}
}
