package redlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// BenchmarkUncontended is one uncontended TryLock+Unlock on five local
// masters, from one goroutine, or from GOMAXPROCS×-cpu goroutines in the
// Parallel form: go test -run ^$ -bench Uncontended -benchmem ./redlock/
func BenchmarkUncontended(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	b.Run("default", func(b *testing.B) { benchUncontended(b, c, nil) })
	// Instrumentation off: the OpenTelemetry no-op providers.
	b.Run("off", func(b *testing.B) {
		benchUncontended(b, c, &redlock.Options{MeterProvider: noopmetric.NewMeterProvider(), TracerProvider: nooptrace.NewTracerProvider()})
	})
}

func benchUncontended(b *testing.B, c *lab.Masters, opts *redlock.Options) {
	l, err := redlock.New(c.Clients(), opts)
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
