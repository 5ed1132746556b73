package labtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlab/redlock/redlock"
)

// Sections runs workers goroutines that each take a lock with acquire,
// count themselves in, check that they are before its deadline, stay for
// hold, count themselves out and unlock, rounds times each (with rounds 0,
// until ctx ends; an acquire that fails because ctx ended is not an
// error). It returns the most holders it saw at once, the sections run,
// and the errors (a worker stops at its first). The mutual-exclusion and
// semaphore-bound tests assert on most and sections.
func Sections(ctx context.Context, workers, rounds int, hold time.Duration, acquire func(ctx context.Context, worker int) (*redlock.Lock, error)) (most, sections int64, errs []error) {
	var in, top, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	fail := func(w int, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("worker %d: %w", w, err))
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() {
			for r := 0; (rounds == 0 || r < rounds) && ctx.Err() == nil; r++ {
				lk, err := acquire(ctx, w)
				if err != nil {
					if ctx.Err() == nil || rounds > 0 {
						fail(w, err)
					}
					return
				}
				n := in.Add(1)
				for m := top.Load(); n > m && !top.CompareAndSwap(m, n); m = top.Load() {
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				done.Add(1)
				if !time.Now().Before(lk.Deadline()) {
					fail(w, errors.New("a holder passed its deadline inside the critical section"))
				}
				in.Add(-1)
				if err := lk.Unlock(context.WithoutCancel(ctx)); err != nil {
					fail(w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return top.Load(), done.Load(), errs
}
