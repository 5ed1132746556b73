package redlock

import (
	"context"
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
