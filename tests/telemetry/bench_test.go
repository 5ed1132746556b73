package telemetry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkUncontendedSDK is redlock's BenchmarkUncontended with the
// OpenTelemetry SDK installed as the bench's redlock-otel cell installs it
// (a metric reader; 1% of traces sampled, batched to a no-op exporter), to
// profile what instrumentation costs:
// go test -run ^$ -bench UncontendedSDK -cpuprofile cpu.out ./tests/telemetry/
func BenchmarkUncontendedSDK(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	l, err := redlock.New(c.Clients(), &redlock.Options{MeterProvider: mp, TracerProvider: tp, MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	b.Run("parallel64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32)
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
