package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Adopt with a token the keys do not hold changes nothing and fails with
// ErrNotAcquired; a bad token is ErrInvalid.
func TestAdoptWrongToken(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(t.Context(), "adopt-wrong")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "adopt-wrong"), lk.Token()) == 5 })
	before := pttls(t, c, "adopt-wrong")
	l2 := newLocker(t, c, nil)
	if _, err := l2.Adopt(t.Context(), "adopt-wrong", lk.Token()+"x"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("Adopt with a wrong token: %v, want ErrNotAcquired", err)
	}
	if got := keyState(t, c, "adopt-wrong"); countValue(got, lk.Token()) != 5 {
		t.Fatalf("the failed Adopt disturbed the holder's keys: %q", got)
	}
	for i, d := range pttls(t, c, "adopt-wrong") {
		if d > before[i] {
			t.Fatalf("master %d: PTTL %v after the failed Adopt, %v before: it was extended", i, d, before[i])
		}
	}
	for _, tok := range []string{"", strings.Repeat("x", redlock.MaxTokenLen+1)} {
		if _, err := l2.Adopt(t.Context(), "adopt-wrong", tok); !errors.Is(err, redlock.ErrInvalid) {
			t.Fatalf("Adopt with a %d-byte token: %v, want ErrInvalid", len(tok), err)
		}
	}
	if _, err := l2.Adopt(nil, "adopt-wrong", lk.Token()); !errors.Is(err, redlock.ErrInvalid) { //nolint:staticcheck // a nil ctx on purpose
		t.Fatalf("Adopt with a nil ctx: %v, want ErrInvalid", err)
	}
}

// Keys written by hand with known PTTLs: the adopted deadline is the
// round's start plus the (|S| − (N − M))-th smallest PTTL, less drift and
// MasterTimeout. Four of five masters hold the token (9, 8, 7, 6 s), so the
// second smallest, 7 s, counts: two of the four must expire before anyone
// else can gather three.
func TestAdoptDeadlineFromPTTLs(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	const key, token = "redlock:{adopt-pttl}", "constructed-token"
	set := func(ttls ...time.Duration) time.Time {
		before := time.Now()
		for i, d := range ttls {
			v := token
			if d == 0 {
				v, d = "someone-else", 9*time.Second
			}
			if err := c.Client(i).Set(t.Context(), key, v, d).Err(); err != nil {
				t.Fatal(err)
			}
		}
		return before
	}
	before := set(9*time.Second, 8*time.Second, 7*time.Second, 6*time.Second, 0)
	lk, err := l.Adopt(t.Context(), "adopt-pttl", token)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	nt := l.Options().MasterTimeout
	drift := 10*time.Second/100 + 2*time.Millisecond // of the lock's TTL (10 s), longer than 7 s
	// Upper bound: the third key was set before after, and keeps 7 s of
	// its own time from then (1 ms for the master's clock resolution).
	hi := after.Add(7*time.Second - drift - nt + time.Millisecond)
	// Lower bound: read no later than after, so at most after − before of
	// the 7 s was gone (1 ms for PTTL's rounding down).
	lo := before.Add(7*time.Second - drift - nt - 2*after.Sub(before) - time.Millisecond)
	if d := lk.Deadline(); d.After(hi) || d.Before(lo) {
		t.Fatalf("deadline at %v after the keys were set, want within [%v, %v] (7 s − drift − MasterTimeout)",
			d.Sub(before), lo.Sub(before), hi.Sub(before))
	}
	if a := lk.Acquisition(); a.TTL > 7*time.Second || a.TTL < 7*time.Second-after.Sub(before)-time.Millisecond {
		t.Fatalf("Acquisition().TTL = %v, want the 7 s key's PTTL", a.TTL)
	}
	if lk.Token() != token || lk.Fence() != 0 || !lk.Valid() {
		t.Fatalf("adopted lock: token %q fence %d valid %v", lk.Token(), lk.Fence(), lk.Valid())
	}
	// Only two masters hold it: no majority, nothing changed.
	if err := c.Client(0).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	set(0, 0, 0, 6*time.Second, 6*time.Second)
	_, err = l.Adopt(t.Context(), "adopt-pttl", token)
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) || !strings.Contains(e.Reason, "no majority") {
		t.Fatalf("Adopt held by two of five: %v, want ErrNotAcquired, no majority", err)
	}
	if got := keyState(t, c, "adopt-pttl"); countValue(got, token) != 2 || countValue(got, "someone-else") != 3 {
		t.Fatalf("keys after the failed Adopt: %q", got)
	}
}

// A process that took a lock "restarts" (its Locker is closed, the token
// kept); a new Locker adopts it. The adopted deadline is no later than
// the original's; it extends, and its Unlock leaves no key anywhere.
func TestAdoptAfterRestartExtendsAndUnlocks(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l1 := newLocker(t, c, nil)
	orig, err := l1.TryLock(t.Context(), "adopt-restart")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a majority, and Close does not send what is still
	// queued: the process restarts once its key is on every master, so
	// that each master's PTTL after the Extend below says what Extend did.
	waitFor(t, "the key on every master", func() bool { return countValue(keyState(t, c, "adopt-restart"), orig.Token()) == c.N() })
	l1.Close()
	l2 := newLocker(t, c, nil)
	lk, err := l2.Adopt(t.Context(), "adopt-restart", orig.Token())
	if err != nil {
		t.Fatal(err)
	}
	if lk.Deadline().After(orig.Deadline()) {
		t.Fatalf("adopted deadline %v after the original's", lk.Deadline().Sub(orig.Deadline()))
	}
	if lk.Resource() != "adopt-restart" || lk.TTL() != 10*time.Second {
		t.Fatalf("adopted lock: resource %q TTL %v", lk.Resource(), lk.TTL())
	}
	old := lk.Deadline()
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !lk.Deadline().After(old) {
		t.Fatalf("Extend did not move the deadline: %v, was %v", lk.Deadline(), old)
	}
	for i, d := range pttls(t, c, "adopt-restart") {
		if d < 9*time.Second {
			t.Fatalf("master %d: PTTL %v after Extend, want about the 10 s TTL", i, d)
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	noKeyOn(t, c, "adopt-restart", 0, 1, 2, 3, 4)
}

// With fencing, the adopted lock carries the fence it was granted; a lock
// taken without fencing cannot give one, and Adopt says so.
func TestAdoptRecoversFence(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l1 := newLocker(t, c, &redlock.Options{Fencing: true})
	for range 3 { // move the counters on, so the fence is not 1
		lk, err := l1.TryLock(t.Context(), "adopt-fence")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	orig, err := l1.TryLock(t.Context(), "adopt-fence")
	if err != nil {
		t.Fatal(err)
	}
	l2 := newLocker(t, c, &redlock.Options{Fencing: true})
	lk, err := l2.Adopt(t.Context(), "adopt-fence", orig.Token())
	if err != nil {
		t.Fatal(err)
	}
	if lk.Fence() != orig.Fence() || orig.Fence() != 4 {
		t.Fatalf("adopted fence %d, granted %d (want 4)", lk.Fence(), orig.Fence())
	}
	plain := newLocker(t, c, nil)
	unfenced, err := plain.TryLock(t.Context(), "adopt-nofence")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l2.Adopt(t.Context(), "adopt-nofence", unfenced.Token())
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) || !strings.Contains(e.Reason, "fence cannot be recovered") {
		t.Fatalf("fenced Adopt of an unfenced lock: %v, want ErrNotAcquired saying the fence cannot be recovered", err)
	}
	if got := keyState(t, c, "adopt-nofence"); countValue(got, unfenced.Token()) < 3 {
		t.Fatalf("the failed Adopt disturbed the keys: %q", got)
	}
}

// An adopted lock can be kept: the keeper extends it from its adopted
// deadline, and Held.Unlock leaves no key.
func TestAdoptedLockKeeps(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	opts := &redlock.Options{TTL: time.Second}
	orig, err := newLocker(t, c, opts).TryLock(t.Context(), "adopt-keep")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := newLocker(t, c, opts).Adopt(t.Context(), "adopt-keep", orig.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Keep(); err != nil {
		t.Fatal(err)
	}
	h := lk
	d0 := h.Deadline()
	waitFor(t, "the keeper's first extension", func() bool { return h.Deadline().After(d0) || h.Err() != nil })
	if err := h.Err(); err != nil {
		t.Fatalf("adopted and kept: %v", err)
	}
	if got := keyState(t, c, "adopt-keep"); countValue(got, orig.Token()) < 3 {
		t.Fatalf("token on %d masters after the keeper's extension", countValue(got, orig.Token()))
	}
	if err := h.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	noKeyOn(t, c, "adopt-keep", 0, 1, 2, 3, 4)
}
