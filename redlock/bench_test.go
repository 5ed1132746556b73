package redlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// BenchmarkUncontended is one uncontended TryLock+Unlock on five local
// masters, from one goroutine, or from GOMAXPROCS×-cpu goroutines in the
// Parallel form: go test -run ^$ -bench Uncontended -benchmem ./redlock/
func BenchmarkUncontended(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	l, err := redlock.New(c.Clients(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lk, err := l.TryLock(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32) // ×GOMAXPROCS (2 here) = 64 goroutines
		var id atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			res := fmt.Sprintf("bench-%d", id.Add(1))
			for pb.Next() {
				lk, err := l.TryLock(ctx, res)
				if err != nil {
					b.Error(err)
					return
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
