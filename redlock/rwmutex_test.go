package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// readersOn returns, per master, how many readers the read-write lock
// name has registered (expired ones included until a script trims them).
func readersOn(t *testing.T, c *lab.Masters, name string, masters ...int) []int64 {
	t.Helper()
	out := make([]int64, len(masters))
	for n, i := range masters {
		v, err := c.Client(i).ZCard(t.Context(), "redlock:{"+name+"}:r").Result()
		if err != nil {
			t.Fatalf("ZCARD on master %d: %v", i, err)
		}
		out[n] = v
	}
	return out
}

// Readers share; a writer is refused while they hold, and readers while a
// writer holds; the same with 2 of 5 masters SIGSTOPped.
func TestRWMutexExclusion(t *testing.T) {
	for _, stalled := range []int{0, 2} {
		t.Run(map[int]string{0: "all up", 2: "2 of 5 stalled"}[stalled], func(t *testing.T) {
			c := lab.ForTest(t, 5, nil)
			l := newLocker(t, c, &redlock.Options{TTL: 5 * time.Second, MasterTimeout: 100 * time.Millisecond})
			rw, err := l.RWMutex("cache")
			if err != nil {
				t.Fatal(err)
			}
			for i := range stalled {
				if err := c.Pause(i); err != nil {
					t.Fatal(err)
				}
			}
			live := []int{2, 3, 4}
			r1, err := rw.TryRLock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			r2, err := rw.TryRLock(t.Context())
			if err != nil {
				t.Fatalf("second reader: %v", err)
			}
			for n, v := range readersOn(t, c, "cache", live...) {
				if v != 2 {
					t.Fatalf("master %d has %d readers; want 2", live[n], v)
				}
			}
			if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("TryLock while readers hold: %v; want ErrNotAcquired", err)
			}
			for _, i := range live {
				if n, _ := c.Client(i).Exists(t.Context(), "redlock:{cache}:w", "redlock:{cache}:wi").Result(); n != 0 {
					t.Fatalf("master %d: a refused TryLock left a writer key or intent", i)
				}
			}
			if err := r1.Extend(t.Context()); err != nil {
				t.Fatalf("reader Extend: %v", err)
			}
			if err := errors.Join(r1.Unlock(t.Context()), r2.Unlock(t.Context())); err != nil {
				t.Fatal(err)
			}
			w, err := rw.TryLock(t.Context())
			if err != nil {
				t.Fatalf("TryLock once readers left: %v", err)
			}
			if _, err := rw.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("TryRLock while a writer holds: %v; want ErrNotAcquired", err)
			}
			if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("a second writer: %v; want ErrNotAcquired", err)
			}
			if err := w.Extend(t.Context()); err != nil {
				t.Fatalf("writer Extend: %v", err)
			}
			if err := w.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			r3, err := rw.TryRLock(t.Context())
			if err != nil {
				t.Fatalf("TryRLock after the writer: %v", err)
			}
			if err := r3.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := readersOn(t, c, "cache", live...); got[0]+got[1]+got[2] != 0 {
				t.Fatalf("readers left after unlocking: %v", got)
			}
		})
	}
}

// writerBehindReader takes a read lock of name on a new Locker of c's
// masters whose waiters poll once a minute (so that they go on wakes),
// and starts a writer's Lock behind it.
func writerBehindReader(t *testing.T, c *lab.Masters, name string) (*redlock.RWMutex, *redlock.Lock, <-chan result) {
	t.Helper()
	l := newLocker(t, c, &redlock.Options{TTL: 30 * time.Second, Retry: redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}})
	rw, _ := l.RWMutex(name)
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rw, r, inBackground(t, rw.Lock)
}

// A writer waiting in Lock stops new readers, is woken when the reader
// ahead of it unlocks (its backoff is longer than the test), and leaves no
// intent behind.
func TestRWMutexWriterPreferred(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	rw, r, got := writerBehindReader(t, c, "cache")
	waitFor(t, "the writer's intent on every master", func() bool {
		for i := range c.N() {
			if n, _ := c.Client(i).Exists(t.Context(), "redlock:{cache}:wi").Result(); n != 1 {
				return false
			}
		}
		return true
	})
	if _, err := rw.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a new reader while a writer waits: %v; want ErrNotAcquired", err)
	}
	waitSubscribed(t, c, "redlock:{cache}:w")
	select {
	case res := <-got:
		t.Fatalf("the writer got the lock while a reader held: %v, %v", res.lk, res.err)
	default:
	}
	unlocked := time.Now()
	if err := r.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("writer: %v", res.err)
	}
	if !res.lk.Acquisition().Start.After(unlocked) {
		t.Fatalf("the writer's granting round started at %v, before the reader's unlock at %v", res.lk.Acquisition().Start, unlocked)
	}
	// Where the writer key is the writer's, its grant dropped the intent
	// in the same script. (A master that refused the round, its reader's
	// release not there yet, keeps the intent until its TTL.)
	granted := 0
	for i := range c.N() {
		if v, _ := c.Client(i).Get(t.Context(), "redlock:{cache}:w").Result(); v != res.lk.Token() {
			continue
		}
		granted++
		if n, _ := c.Client(i).Exists(t.Context(), "redlock:{cache}:wi").Result(); n != 0 {
			t.Errorf("master %d: the intent outlived the writer's grant there", i)
		}
	}
	if granted < 2 {
		t.Fatalf("the writer key is the writer's on %d masters; want a majority", granted)
	}
	if err := res.lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A reader refused while a writer held goes in when that writer unlocks,
// before the next writer, which waits with its intent recorded (phase
// fairness: its pass lets it by the intent); a new reader is still
// refused while that writer waits.
func TestRWMutexWaitingReaderGoesBeforeNextWriter(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	opts := func(d time.Duration) *redlock.Options {
		return &redlock.Options{TTL: 30 * time.Second, Retry: redlock.RetryPolicy{MinDelay: d, MaxDelay: d}}
	}
	first, _ := newLocker(t, c, opts(time.Minute)).RWMutex("cache")
	w1, err := first.TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The reader polls often, so that it needs no wake; the next writer
	// polls once a minute and hears no release, so that it cannot take
	// the lock when the first writer unlocks.
	lr := newLocker(t, c, opts(50*time.Millisecond))
	readers, _ := lr.RWMutex("cache")
	lw := newLocker(t, c, opts(time.Minute))
	redlock.DropWakes(lw)
	next, _ := lw.RWMutex("cache")

	type result struct {
		lk  *redlock.Lock
		err error
	}
	rctx, rcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer rcancel()
	gotR := make(chan result, 1)
	go func() { lk, err := readers.RLock(rctx); gotR <- result{lk, err} }()
	waitFor(t, "the reader refused while the first writer holds", func() bool { return redlock.Waiting(lr) == 1 })

	wctx, wcancel := context.WithCancel(t.Context())
	defer wcancel()
	gotW := make(chan result, 1)
	go func() { lk, err := next.Lock(wctx); gotW <- result{lk, err} }()
	waitFor(t, "the next writer's intent on every master", func() bool {
		for i := range c.N() {
			if n, _ := c.Client(i).Exists(t.Context(), "redlock:{cache}:wi").Result(); n != 1 {
				return false
			}
		}
		return true
	})
	if err := w1.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-gotR
	if r.err != nil {
		t.Fatalf("the reader that waited for the first writer: %v; want the lock before the next writer", r.err)
	}
	if _, err := readers.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a new reader while the next writer waits: %v; want ErrNotAcquired", err)
	}
	if _, err := next.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a writer while the reader holds: %v; want ErrNotAcquired", err)
	}
	select {
	case w := <-gotW:
		t.Fatalf("the next writer got the lock while the reader held: %v, %v", w.lk, w.err)
	default:
	}
	if err := r.lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	wcancel()
	if w := <-gotW; w.err == nil {
		_ = w.lk.Unlock(t.Context())
	}
}

// A reader that never unlocks expires on the masters, by their clocks: a
// writer waiting in Lock gets the lock after the reader's deadline.
func TestRWMutexReadersExpireServerSide(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl = 700 * time.Millisecond
	l := newLocker(t, c, &redlock.Options{TTL: ttl})
	rw, _ := l.RWMutex("cache")
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	expiresWithin(t, c, "redlock:{cache}:r", ttl, r)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Acquisition().Start.After(r.Deadline()) {
		t.Fatalf("the writer's round started at %v, before the reader's deadline %v", w.Acquisition().Start, r.Deadline())
	}
	if err := r.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("extending the expired reader: %v; want ErrLost", err)
	}
	if err := w.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// With fencing, each write lock's fence is larger than every earlier
// one, across readers in between; a read lock's fence is 0.
func TestRWMutexWriteFencesOrder(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	rw, _ := l.RWMutex("cache")
	var last uint64
	for n := range 5 {
		w, err := rw.TryLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if w.Fence() <= last {
			t.Fatalf("write %d: fence %d after %d; want larger", n, w.Fence(), last)
		}
		last = w.Fence()
		if err := w.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		r, err := rw.TryRLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Fence() != 0 {
			t.Fatalf("read fence %d; want 0", r.Fence())
		}
		if err := r.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.N() {
		v, _ := c.Client(i).HGet(t.Context(), "redlock:{cache}:w:fence", "fence").Uint64()
		if v != last {
			t.Errorf("master %d: fence counter %d; want %d", i, v, last)
		}
	}
}

// The semaphore and the read-write lock work for an ACL user limited to
// lab.DefaultACLRules (the README's line): every command their scripts
// call is on it.
// Both transports: the fast path's own connections and the plain path's
// go-redis pipelines (ViaClient).
func TestSemaphoreRWUnderDefaultACL(t *testing.T) {
	for _, via := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "plain"}[via], func(t *testing.T) { semaphoreRWUnderACL(t, via) })
	}
}

func semaphoreRWUnderACL(t *testing.T, viaClient bool) {
	c := lab.ForTest(t, 3, &lab.Options{ACLUser: "redlock"})
	l := newLocker(t, c, &redlock.Options{Fencing: true, ViaClient: viaClient})
	s, _ := l.Semaphore("exports", 2)
	p, err := s.TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("semaphore: %v", err)
	}
	if n, err := s.Holders(t.Context()); err != nil || n != 1 {
		t.Fatalf("Holders = %d, %v; want 1", n, err)
	}
	rw, _ := l.RWMutex("cache")
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatalf("read lock: %v", err)
	}
	if err := errors.Join(p.Extend(t.Context()), r.Extend(t.Context()), p.Unlock(t.Context()), r.Unlock(t.Context())); err != nil {
		t.Fatal(err)
	}
	if _, err := three(l).TryAcquire(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("permits mismatch: %v; want ErrInvalid", err)
	}
	w, err := rw.Lock(t.Context())
	if err != nil {
		t.Fatalf("write lock: %v", err)
	}
	if w.Fence() == 0 {
		t.Fatal("write lock without a fence under Options.Fencing")
	}
	if err := w.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// three is the semaphore "exports" named with 3 permits.
func three(l *redlock.Locker) *redlock.Semaphore {
	s, _ := l.Semaphore("exports", 3)
	return s
}
