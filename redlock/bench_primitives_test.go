package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// BenchmarkPrimitives measures sections per second on one contended
// resource, with every worker waiting (Lock, Acquire, RLock) and leaving
// at once, for a fixed 2 s per cell on five local masters: the mutex, the
// semaphore with k = 1, 3 and 8, and the read-write lock with 90 % reads
// and with reads only.
// Workers are spread over 4 Lockers. Run it once per cell:
// go test -run '^$' -bench Primitives -benchtime 1x ./redlock/
func BenchmarkPrimitives(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	var lockers []*redlock.Locker
	for range 4 {
		l, err := redlock.New(c.Clients(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		lockers = append(lockers, l)
	}
	type section func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error)
	mutex := func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) { return l.Lock(ctx, "bench-mutex") }
	sem := func(k int) section {
		return func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) {
			s, err := l.Semaphore(fmt.Sprintf("bench-sem-%d", k), k)
			if err != nil {
				return nil, err
			}
			return s.Acquire(ctx)
		}
	}
	rw90 := func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) {
		rw, err := l.RWMutex("bench-rw")
		if err != nil {
			return nil, err
		}
		if rand.N(10) == 0 {
			return rw.Lock(ctx)
		}
		return rw.RLock(ctx)
	}
	// Reads only: the ceiling of the read-write lock's throughput on this
	// machine, with no writer to wait for (docs/bench.md).
	reads := func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) {
		rw, err := l.RWMutex("bench-rw-reads")
		if err != nil {
			return nil, err
		}
		return rw.RLock(ctx)
	}
	cells := []struct {
		name    string
		workers int
		do      section
	}{
		{"mutex", 8, mutex}, {"sem-k1", 8, sem(1)}, {"sem-k3", 8, sem(3)}, {"sem-k8", 8, sem(8)},
		{"mutex", 64, mutex}, {"sem-k1", 64, sem(1)}, {"sem-k3", 64, sem(3)}, {"sem-k8", 64, sem(8)},
		{"rw90", 64, rw90}, {"rw-reads", 64, reads},
	}
	for _, cell := range cells {
		b.Run(fmt.Sprintf("%s/%d", cell.name, cell.workers), func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var done atomic.Int64
				var wg sync.WaitGroup
				for w := range cell.workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							lk, err := cell.do(ctx, lockers[w%len(lockers)])
							if err != nil {
								continue
							}
							_ = lk.Unlock(context.Background())
							done.Add(1)
						}
					}()
				}
				wg.Wait()
				cancel()
				b.ReportMetric(float64(done.Load())/2, "sections/s")
			}
		})
	}
}

// BenchmarkSemaphorePermits measures what one acquisition costs against
// the number of permits k (every round names the k slots to every master):
// Acquire on five local masters, one Locker, with no other holder
// (free: the first slot tried is free) and with k−1 permits held (last:
// the masters try about k/2 slots before the free one). Acquire, which
// retries a failed round. ns/op is the acquisition alone (the Unlock after it is not timed); cmds/op counts
// every command the five masters ran for the acquisition and its release,
// those inside the scripts included (INFO commandstats).
// go test -run '^$' -bench SemaphorePermits -benchtime 2000x ./redlock/
func BenchmarkSemaphorePermits(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	l, err := redlock.New(c.Clients(), &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	commands := func() int64 {
		var n int64
		for i := range c.N() {
			info, err := c.Client(i).Info(context.Background(), "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			for line := range strings.Lines(info) {
				// cmdstat_set:calls=12,usec=...
				if _, rest, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(line, "cmdstat_") && !strings.HasPrefix(line, "cmdstat_info:") {
					v, _, _ := strings.Cut(rest, ",")
					k, _ := strconv.ParseInt(v, 10, 64)
					n += k
				}
			}
		}
		return n
	}
	for _, k := range []int{32, 256, 1024} {
		for _, fill := range []string{"free", "last"} {
			b.Run(fmt.Sprintf("k=%d/%s", k, fill), func(b *testing.B) {
				ctx := context.Background()
				s, err := l.Semaphore(fmt.Sprintf("bench-permits-%d-%s", k, fill), k)
				if err != nil {
					b.Fatal(err)
				}
				var held []*redlock.Lock
				if fill == "last" {
					for range k - 1 {
						lk, err := s.TryAcquire(ctx, redlock.WithTTL(time.Minute))
						if err != nil {
							b.Fatal(err)
						}
						held = append(held, lk)
					}
				}
				before := commands()
				for b.Loop() {
					// Acquire, not TryAcquire: on a loaded machine a master
					// skipped while the permits were taken lacks one, and a
					// round where the masters offer different slots fails.
					actx, cancel := context.WithTimeout(ctx, 10*time.Second)
					lk, err := s.Acquire(actx)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := lk.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.StopTimer()
				// The commandstats reads themselves: one INFO per master, not counted.
				b.ReportMetric(float64(commands()-before)/float64(b.N), "cmds/op")

				for _, lk := range held {
					lk.Unlock(ctx)
				}
			})
		}
	}
}
