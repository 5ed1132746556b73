//go:build otel

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlab/redlock/redlock"
)

// otelBuilt: the telemetry scenario and -metrics-addr work in this build
// (extras.go).
const otelBuilt = true

// benchTelemetry is the OpenTelemetry SDK the redlock-otel implementations
// report to: a meter provider whose reader is the Prometheus exporter,
// served at -metrics-addr when given, and, for redlock-otel-traces, a
// tracer provider that samples 1% of traces into an exporter that discards
// them (the cost of recording, as a production setup would sample).
type benchTelemetry struct {
	mp  *sdkmetric.MeterProvider
	tp  *sdktrace.TracerProvider
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup // the server's goroutine
}

func newBenchTelemetry(addr string, stderr io.Writer) (*benchTelemetry, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &benchTelemetry{
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		tp: sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
			sdktrace.WithBatcher(tracetest.NewNoopExporter())),
	}
	if addr == "" {
		return t, nil
	}
	t.ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.shutdown()
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	t.wg.Go(func() { t.srv.Serve(t.ln) })
	fmt.Fprintf(stderr, "redlock-bench: metrics (Prometheus format) at http://%s/metrics while the bench runs (redlock-otel cells)\n", t.ln.Addr())
	return t, nil
}

// options returns the Locker options for one of the telemetry variants.
func (t *benchTelemetry) options(variant string, o redlock.Options) redlock.Options {
	switch variant {
	case "off":
		o.MeterProvider, o.TracerProvider = noopmetric.NewMeterProvider(), nooptrace.NewTracerProvider()
	case "sdk":
		o.MeterProvider, o.TracerProvider = t.mp, nooptrace.NewTracerProvider()
	case "sdk-traces":
		o.MeterProvider, o.TracerProvider = t.mp, t.tp
	}
	return o
}

func (t *benchTelemetry) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if t.srv != nil {
		errs = append(errs, t.srv.Shutdown(ctx))
		t.wg.Wait()
	}
	errs = append(errs, t.mp.Shutdown(ctx), t.tp.Shutdown(ctx))
	return errors.Join(errs...)
}
