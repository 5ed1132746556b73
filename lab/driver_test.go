package lab_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
)

// fakeDriver fails master bad's start at once; every other start blocks
// until its context ends (a master that would take forever) and records
// that it was cancelled.
type fakeDriver struct {
	bad       int
	mu        sync.Mutex
	cancelled []int
	closed    int
}

var errBadStart = errors.New("fake: master does not start")

func (f *fakeDriver) Start(ctx context.Context, i int) (string, error) {
	if i == f.bad {
		return "", errBadStart
	}
	select {
	case <-ctx.Done():
		f.mu.Lock()
		f.cancelled = append(f.cancelled, i)
		f.mu.Unlock()
		return "", ctx.Err()
	case <-time.After(time.Minute):
		return "127.0.0.1:1", nil
	}
}
func (f *fakeDriver) Pause(int) error                          { return nil }
func (f *fakeDriver) Resume(int) error                         { return nil }
func (f *fakeDriver) Kill(int) error                           { return nil }
func (f *fakeDriver) Restart(context.Context, int, bool) error { return nil }
func (f *fakeDriver) Cut(int) error                            { return nil }
func (f *fakeDriver) Heal(int) error                           { return nil }
func (f *fakeDriver) Close() error                             { f.mu.Lock(); f.closed++; f.mu.Unlock(); return nil }

// A failed master start stops the others' starts and cleans up: Start
// returns the failure (not a minute later), every other start saw its
// context cancelled, and the driver was closed once.
func TestFailedStartCancelsTheOthers(t *testing.T) {
	f := &fakeDriver{bad: 2}
	start := time.Now()
	c, err := lab.Start(t.Context(), 5, &lab.Options{
		Backend:   lab.Docker,
		NewDriver: func(context.Context, int, lab.Options) (lab.Driver, error) { return f, nil },
	})
	took := time.Since(start)
	if c != nil || !errors.Is(err, errBadStart) {
		t.Fatalf("Start = %v, %v; want nil and the failed start's error", c, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cancelled) != 4 {
		t.Errorf("starts cancelled: %v, want the 4 others (took %v)", f.cancelled, took)
	}
	if f.closed != 1 {
		t.Errorf("driver closed %d times, want 1", f.closed)
	}
}
