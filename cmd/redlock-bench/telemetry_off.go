//go:build !otel

package main

import (
	"io"

	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlab/redlock/redlock"
)

// otelBuilt: the telemetry scenario and -metrics-addr work in this build
// (extras.go).
const otelBuilt = false

// benchTelemetry without the OpenTelemetry SDK: parseFlags refuses the
// telemetry scenario and -metrics-addr, so only "off" is asked for.
type benchTelemetry struct{}

func newBenchTelemetry(string, io.Writer) (*benchTelemetry, error) { return &benchTelemetry{}, nil }

// options returns the Locker options for one of the telemetry variants;
// without the SDK, every variant is "off" (no-op providers passed).
func (*benchTelemetry) options(_ string, o redlock.Options) redlock.Options {
	o.MeterProvider, o.TracerProvider = noopmetric.NewMeterProvider(), nooptrace.NewTracerProvider()
	return o
}

func (*benchTelemetry) shutdown() error { return nil }
