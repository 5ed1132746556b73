package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a Locker over c that reports to a manual reader and a span
// recorder.
func setup(t *testing.T, c *lab.Masters, opts redlock.Options) (*redlock.Locker, *sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	opts.MeterProvider, opts.TracerProvider = mp, tp
	if opts.MasterTimeout == 0 {
		opts.MasterTimeout = 200 * time.Millisecond
	}
	l, err := redlock.New(c.Clients(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	return l, reader, rec
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum returns the sum of an int counter's points whose attributes include
// every key=value in want.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += p.Value
			}
		}
	default:
		t.Fatalf("%s is a %T", name, m.Data)
	}
	return n
}

// count returns how many values a float histogram recorded with want.
func count(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	var n uint64
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += p.Count
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += p.Count
			}
		}
	default:
		t.Fatalf("%s is a %T", name, m.Data)
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

var (
	outcome = attribute.Key("redlock.outcome")
	reason  = attribute.Key("redlock.reason")
)

// noSecrets fails if the resource name or a token appears in any metric
// attribute, span attribute, span name or event attribute.
func noSecrets(t *testing.T, r *sdkmetric.ManualReader, rec *tracetest.SpanRecorder, secrets ...string) {
	t.Helper()
	check := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			for _, s := range secrets {
				if strings.Contains(kv.Value.Emit(), s) || strings.Contains(string(kv.Key), s) {
					t.Errorf("%s: attribute %s=%s carries %q", where, kv.Key, kv.Value.Emit(), s)
				}
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes.ToSlice())
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes.ToSlice())
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes.ToSlice())
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes.ToSlice())
				}
			}
		}
	}
	for _, s := range rec.Ended() {
		check("span "+s.Name(), s.Attributes())
		for _, e := range s.Events() {
			check("span "+s.Name()+" event "+e.Name, e.Attributes)
		}
	}
}

func TestAcquisitionContentionExtensionRelease(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l, reader, rec := setup(t, c, redlock.Options{TTL: 2 * time.Second})
	other, _, _ := setup(t, c, redlock.Options{})
	const resource = "invoice:secret-customer-42"
	lk, err := l.TryLock(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	ms := collect(t, reader)
	if n := count(t, ms, "redlock.acquire.duration", outcome.String("acquired")); n != 1 {
		t.Fatalf("acquire.duration{acquired}: %d points, want 1", n)
	}
	if n := count(t, ms, "redlock.acquire.validity"); n != 1 {
		t.Fatalf("acquire.validity: %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.leases.held"); n != 1 {
		t.Fatalf("leases.held = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.master.calls"); n != 5 {
		t.Fatalf("master.calls = %d, want one per master", n)
	}
	if n := sum(t, ms, "redlock.master.calls", outcome.String("ok")); n < 3 {
		t.Fatalf("master.calls{ok} = %d, want a majority", n)
	}
	// A contender is refused by the holder's keys.
	if _, err := other.TryLock(t.Context(), resource); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("contender: %v", err)
	}
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	ms = collect(t, reader)
	if n := sum(t, ms, "redlock.extensions", outcome.String("extended")); n != 1 {
		t.Fatalf("extensions{extended} = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.leases.held"); n != 0 {
		t.Fatalf("leases.held = %d after Unlock, want 0", n)
	}
	if n := sum(t, ms, "redlock.releases", outcome.String("released")); n != 1 {
		t.Fatalf("releases{released} = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.master.calls"); n != 15 {
		t.Fatalf("master.calls = %d after acquire, extend, release, want 15", n)
	}
	// Spans: one per operation, the breakdown, an event per master.
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	try, ok := spans["redlock.TryLock"]
	if !ok || spans["redlock.Extend"] == nil || spans["redlock.Unlock"] == nil {
		t.Fatalf("spans: %v", spans)
	}
	attrs := attribute.NewSet(try.Attributes()...)
	for _, k := range []attribute.Key{"redlock.elapsed", "redlock.drift", "redlock.validity", "redlock.safety_margin"} {
		if _, ok := attrs.Value(k); !ok {
			t.Errorf("TryLock span lacks %s: %v", k, try.Attributes())
		}
	}
	if v, _ := attrs.Value(outcome); v.AsString() != "acquired" {
		t.Errorf("TryLock span outcome %q", v.AsString())
	}
	if n := len(try.Events()); n != 5 {
		t.Errorf("TryLock span has %d events, want one per master", n)
	}
	noSecrets(t, reader, rec, resource, "secret-customer", lk.Token())
}

func TestContendedFailureIsHeldByAnother(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	holder, _, _ := setup(t, c, redlock.Options{})
	l, reader, rec := setup(t, c, redlock.Options{})
	lk, err := holder.TryLock(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	waitAll(t, c, "busy", lk.Token())
	if _, err := l.TryLock(t.Context(), "busy"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v", err)
	}
	ms := collect(t, reader)
	if n := count(t, ms, "redlock.acquire.duration", outcome.String("held_by_another")); n != 1 {
		t.Fatalf("acquire.duration{held_by_another} = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.master.calls", outcome.String("refused")); n != 3 {
		t.Fatalf("master.calls{refused} = %d, want 3", n)
	}
	var failed bool
	for _, s := range rec.Ended() {
		if s.Name() == "redlock.TryLock" && s.Status().Code.String() == "Error" && len(s.Events()) >= 3 {
			failed = true
		}
	}
	if !failed {
		t.Fatal("the failed TryLock's span is not marked as an error")
	}
}

// waitAll waits until every master holds token for resource.
func waitAll(t *testing.T, c *lab.Masters, resource, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for i := range c.N() {
			if v, _ := c.Client(i).Get(t.Context(), "redlock:{"+resource+"}").Result(); v == token {
				n++
			}
		}
		if n == c.N() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("token on %d of %d masters", n, c.N())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestStalledMasterIsSkipped(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l, reader, _ := setup(t, c, redlock.Options{MasterTimeout: 50 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "warm")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	if err := c.Pause(2); err != nil {
		t.Fatal(err)
	}
	stalled := attribute.String("server.address", c.Addrs()[2])
	for range 3 {
		lk, err := l.TryLock(t.Context(), "stalled")
		if err != nil {
			t.Fatal(err)
		}
		lk.Unlock(t.Context())
	}
	ms := collect(t, reader)
	if n := sum(t, ms, "redlock.master.skipped", stalled); n != 1 {
		t.Fatalf("master.skipped{%s} = %d, want 1", c.Addrs()[2], n)
	}
	if n := sum(t, ms, "redlock.master.skipped"); n != 1 {
		t.Fatalf("master.skipped summed over masters = %d, want only the stalled one", n)
	}
	if n := sum(t, ms, "redlock.master.calls", stalled, outcome.String("unavailable")); n == 0 {
		t.Fatal("no call to the stalled master counted as unavailable")
	}
	c.ResumeAll()
}

func TestLostLease(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l, reader, _ := setup(t, c, redlock.Options{TTL: 500 * time.Millisecond, MasterTimeout: 40 * time.Millisecond})
	err := l.Do(t.Context(), "doomed", func(ctx context.Context) error {
		for _, i := range []int{0, 2, 4} {
			if err := c.Pause(i); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Do: %v, want ErrLost", err)
	}
	ms := collect(t, reader)
	if n := sum(t, ms, "redlock.leases.lost", reason.String("deadline")); n != 1 {
		t.Fatalf("leases.lost{deadline} = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.extensions", outcome.String("failed")) + sum(t, ms, "redlock.extensions", outcome.String("expired")); n == 0 {
		t.Fatal("no failed extension counted")
	}
	c.ResumeAll()
}

// A Locker on the default (global) providers records nothing until the
// application installs an SDK, and everything after, even when the SDK is
// installed after New. WriteFenced with no lock in its context counts
// stale writes on the global meter provider. (This test sets the process-wide
// providers: the other tests here pass their own.)
func TestGlobalProviders(t *testing.T) {
	// OpenTelemetry's globals delegate once: after this test has installed
	// an SDK, a second run in the same process (-count=2) would find it
	// there, not the built-in providers the test is about.
	if fmt.Sprintf("%T", otel.GetMeterProvider()) != "*global.meterProvider" {
		t.Skipf("the global meter provider is %T: an SDK was installed earlier in this process (run with -count=1)", otel.GetMeterProvider())
	}
	c := lab.ForTest(t, 3, nil)
	l, err := redlock.New(c.Clients(), &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lk, err := l.TryLock(t.Context(), "before")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { mp.Shutdown(context.Background()); tp.Shutdown(context.Background()) })
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)

	lk, err = l.TryLock(t.Context(), "after")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	ms := collect(t, reader)
	if n := count(t, ms, "redlock.acquire.duration", outcome.String("acquired")); n != 1 {
		t.Fatalf("acquire.duration{acquired} = %d, want 1 (the acquisition after the SDK was installed)", n)
	}
	if n := sum(t, ms, "redlock.releases", outcome.String("released")); n != 1 {
		t.Fatalf("releases{released} = %d, want 1", n)
	}
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
	}
	if names["redlock.TryLock"] != 1 || names["redlock.Unlock"] != 1 {
		t.Fatalf("spans %v, want one TryLock and one Unlock", names)
	}

	var db redis.Scripter = c.Client(0)
	if err := redlock.WriteFenced(t.Context(), db, "acct", 2, "new-owner-token", "v2"); err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(t.Context(), db, "acct", 1, "old-owner-token", "v1"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("stale write: %v", err)
	}
	if n := sum(t, collect(t, reader), "redlock.fenced_writes.stale"); n != 1 {
		t.Fatalf("fenced_writes.stale = %d, want 1", n)
	}
}

// With a ResourceLabel, metrics carry the label and still never the name.
func TestResourceLabel(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l, reader, rec := setup(t, c, redlock.Options{ResourceLabel: func(r string) string {
		kind, _, _ := strings.Cut(r, ":")
		return kind
	}})
	lk, err := l.TryLock(t.Context(), "invoice:secret-42")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	ms := collect(t, reader)
	if n := count(t, ms, "redlock.acquire.duration", attribute.String("redlock.resource.label", "invoice"), outcome.String("acquired")); n != 1 {
		t.Fatalf("acquire.duration{label=invoice} = %d, want 1", n)
	}
	// Held leases and releases carry the label too (synchronous
	// instruments here; without a label they are observed).
	if n := sum(t, ms, "redlock.releases", attribute.String("redlock.resource.label", "invoice"), outcome.String("released")); n != 1 {
		t.Fatalf("releases{label=invoice,released} = %d, want 1", n)
	}
	if n := sum(t, ms, "redlock.leases.held", attribute.String("redlock.resource.label", "invoice")); n != 0 {
		t.Fatalf("leases.held{label=invoice} = %d after Unlock, want 0", n)
	}
	lk2, err := l.TryLock(t.Context(), "invoice:secret-43")
	if err != nil {
		t.Fatal(err)
	}
	defer lk2.Unlock(t.Context())
	if n := sum(t, collect(t, reader), "redlock.leases.held", attribute.String("redlock.resource.label", "invoice")); n != 1 {
		t.Fatalf("leases.held{label=invoice} = %d while one is held, want 1", n)
	}
	noSecrets(t, reader, rec, "secret-42", lk.Token())
}

// Stale fenced writes are counted on the Locker's MeterProvider, not the
// global one, when the lock is known: WriteFenced under Do's context (the
// README's pattern).
func TestStaleWritesOnTheLockersProvider(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l, reader, _ := setup(t, c, redlock.Options{Fencing: true})
	var db redis.Scripter = c.Client(0)
	err := l.Do(t.Context(), "acct", func(ctx context.Context) error {
		lk, _ := redlock.FromContext(ctx)
		// A later holder (a larger fence) has written first.
		if err := redlock.WriteFenced(ctx, db, "acct-row", lk.Fence()+1, "a-later-holder", "v2"); err != nil {
			return err
		}
		return redlock.WriteFenced(ctx, db, "acct-row", lk.Fence(), lk.Token(), "v1")
	})
	if !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("Do: %v, want ErrStaleFence", err)
	}
	if n := sum(t, collect(t, reader), "redlock.fenced_writes.stale"); n != 1 {
		t.Fatalf("fenced_writes.stale on the Locker's provider = %d, want 1", n)
	}

	// A lock taken by TryLock: its Context carries it.
	lk, err := l.TryLock(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	if err := redlock.WriteFenced(t.Context(), db, "acct-row", lk.Fence()+1, "a-later-holder", "v3"); err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(lk.Context(), db, "acct-row", lk.Fence(), lk.Token(), "v4"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("WriteFenced with the lock's Context: %v, want ErrStaleFence", err)
	}
	if n := sum(t, collect(t, reader), "redlock.fenced_writes.stale"); n != 2 {
		t.Fatalf("fenced_writes.stale on the Locker's provider = %d, want 2", n)
	}
}
