package redlocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// The semaphore and the read-write lock run on redlocktest's masters:
// Holding sees their locks, a stalled minority leaves them working, and
// FastForward past the TTL frees a permit and a reader as it frees a key.
func TestSemaphoreAndRWMutex(t *testing.T) {
	m := redlocktest.New(t, &redlocktest.Options{N: 3})
	l := newLocker(t, m, redlock.Options{TTL: 5 * time.Second})
	warm(t, m, l)
	ctx := context.Background()
	s, err := l.Semaphore("exports", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stall(0); err != nil {
		t.Fatal(err)
	}
	a, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("permit with master 0 stalled: %v", err)
	}
	if n := m.Holding(l, a); n != 2 {
		t.Fatalf("Holding(permit) = %d; want 2 (the live masters)", n)
	}
	if err := m.Resume(0); err != nil {
		t.Fatal(err)
	}
	b, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("third permit: %v; want ErrNotAcquired", err)
	}
	m.FastForward(6 * time.Second)
	c, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("a permit after FastForward past the TTL: %v", err)
	}
	_ = errors.Join(a.Unlock(ctx), b.Unlock(ctx), c.Unlock(ctx))

	rw, err := l.RWMutex("cache")
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("read lock: %v", err)
	}
	eventually(t, "Holding(read lock) did not reach 3", func() bool { return m.Holding(l, r) == 3 }) // as the write lock's, below
	if _, err := rw.TryLock(ctx); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("write lock under a reader: %v; want ErrNotAcquired", err)
	}
	m.FastForward(6 * time.Second)
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("write lock after FastForward past the reader's TTL: %v", err)
	}
	// TryLock returns on a majority's grant: the third master's reply may
	// still be on its way (its script parsed and run by miniredis, under
	// -race), as warm's lock may.
	eventually(t, "Holding(write lock) did not reach 3", func() bool { return m.Holding(l, w) == 3 })
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
