package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// gauge returns the value of a float gauge's only point, and whether there
// is one.
func gauge(t *testing.T, ms map[string]metricdata.Metrics, name string) (float64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is a %T", name, m.Data)
	}
	if len(g.DataPoints) != 1 {
		t.Fatalf("%s has %d points, want 1", name, len(g.DataPoints))
	}
	return g.DataPoints[0].Value, true
}

// histSum returns the sum of the values a float histogram recorded with
// outcome o.
func histSum(t *testing.T, ms map[string]metricdata.Metrics, name, o string) float64 {
	t.Helper()
	var s float64
	for _, p := range ms[name].Data.(metricdata.Histogram[float64]).DataPoints {
		if has(p.Attributes, []attribute.KeyValue{outcome.String(o)}) {
			s += p.Sum
		}
	}
	return s
}

// redlock.hold.duration: from acquisition to Unlock (released), or to the
// loss of a kept lock (lost); redlock.hold.oldest is the age of the oldest
// lock held, 0 when none; redlock.ttl is the Locker's TTL.
func TestHoldDuration(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	// MasterTimeout 200 ms (setup's): the first round also dials, and a
	// loaded machine overran 40 ms there.
	l, reader, rec := setup(t, c, redlock.Options{TTL: 2 * time.Second})
	const resource = "hold:secret-77"
	before := time.Now()
	lk, err := l.TryLock(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	// The oldest lock's age grows while it is held.
	var age float64
	deadline := time.Now().Add(10 * time.Second)
	for age < 0.05 {
		if time.Now().After(deadline) {
			t.Fatalf("redlock.hold.oldest = %v after %v, want it to grow", age, time.Since(before))
		}
		time.Sleep(10 * time.Millisecond)
		age, _ = gauge(t, collect(t, reader), "redlock.hold.oldest")
	}
	ms := collect(t, reader)
	if ttl, ok := gauge(t, ms, "redlock.ttl"); !ok || ttl != 2 {
		t.Fatalf("redlock.ttl = %v (%v), want 2", ttl, ok)
	}
	if n := count(t, ms, "redlock.hold.duration"); n != 0 {
		t.Fatalf("hold.duration has %d values while the lock is held, want 0", n)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	held := time.Since(before).Seconds()
	ms = collect(t, reader)
	if n := count(t, ms, "redlock.hold.duration", outcome.String("released")); n != 1 {
		t.Fatalf("hold.duration{released} = %d values, want 1", n)
	}
	if s := histSum(t, ms, "redlock.hold.duration", "released"); s < age || s > held {
		t.Fatalf("hold.duration{released} = %vs, want between %v (the gauge's age before Unlock) and %v", s, age, held)
	}
	if v, _ := gauge(t, ms, "redlock.hold.oldest"); v != 0 {
		t.Fatalf("redlock.hold.oldest = %v with no lock held, want 0", v)
	}
	// With several locks held, the gauge follows the oldest one still held.
	first, err := l.TryLock(t.Context(), "hold:first")
	if err != nil {
		t.Fatal(err)
	}
	for firstAt := time.Now(); time.Since(firstAt) < 100*time.Millisecond; {
		time.Sleep(10 * time.Millisecond) // let the first lock age
	}
	beforeLater := time.Now()
	var later []*redlock.Lock
	for i := range 20 { // over every shard of the list
		lk, err := l.TryLock(t.Context(), fmt.Sprintf("hold:later-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, lk)
	}
	if v, _ := gauge(t, collect(t, reader), "redlock.hold.oldest"); v < 0.1 {
		t.Fatalf("redlock.hold.oldest = %v with a lock held for over 100ms", v)
	}
	first.Unlock(t.Context())
	// The first lock is over 100ms older than any later one.
	if v, _ := gauge(t, collect(t, reader), "redlock.hold.oldest"); v > time.Since(beforeLater).Seconds() {
		t.Fatalf("redlock.hold.oldest = %v after the oldest lock was unlocked: older than every lock still held", v)
	}
	for _, lk := range later {
		lk.Unlock(t.Context())
	}

	// A second Unlock records nothing more.
	lk.Unlock(t.Context())
	if n := count(t, collect(t, reader), "redlock.hold.duration"); n != 22 {
		t.Fatalf("hold.duration has %d values after 22 Unlocks and a second Unlock, want 22", n)
	}

	// A kept lock lost at its deadline: one value, lost, at the loss.
	err = l.Do(t.Context(), resource, func(ctx context.Context) error {
		for _, i := range []int{0, 2, 4} {
			if err := c.Pause(i); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	}, redlock.WithTTL(500*time.Millisecond))
	c.ResumeAll()
	if !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Do: %v, want ErrLost", err)
	}
	ms = collect(t, reader)
	if n := count(t, ms, "redlock.hold.duration", outcome.String("lost")); n != 1 {
		t.Fatalf("hold.duration{lost} = %d values, want 1", n)
	}
	if n := count(t, ms, "redlock.hold.duration", outcome.String("released")); n != 22 {
		t.Fatalf("hold.duration{released} = %d values after a lost Do, want still 22", n)
	}
	if s := histSum(t, ms, "redlock.hold.duration", "lost"); s > 0.5 {
		t.Fatalf("hold.duration{lost} = %vs, over the 500ms TTL: loss is declared before the deadline", s)
	}
	noSecrets(t, reader, rec, "secret-77", lk.Token())
}

// redlock.hold.duration tells locks kept in the background (Hold, Keep,
// Do: leaders, long consumers, held by design) from the others
// (redlock.kept), so that an alert on hold time can leave them out.
func TestHoldDurationKept(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	for _, labelled := range []bool{false, true} {
		opts := redlock.Options{}
		if labelled {
			opts.ResourceLabel = func(string) string { return "kind" }
		}
		l, reader, _ := setup(t, c, opts)
		ctx := t.Context()
		lk, err := l.TryLock(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		lk.Unlock(ctx)
		h, err := l.Lock(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Keep(); err != nil {
			t.Fatal(err)
		}
		h.Unlock(ctx)
		kept, err := l.TryLock(ctx, "kept-later")
		if err != nil {
			t.Fatal(err)
		}
		if err := kept.Keep(); err != nil {
			t.Fatal(err)
		}
		kept.Unlock(ctx)
		if err := l.Do(ctx, "done", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ms := collect(t, reader)
		keptAttr := attribute.Key("redlock.kept")
		if n := count(t, ms, "redlock.hold.duration", outcome.String("released"), keptAttr.Bool(false)); n != 1 {
			t.Errorf("labelled %v: hold.duration{released, kept=false} = %d values, want 1 (TryLock)", labelled, n)
		}
		if n := count(t, ms, "redlock.hold.duration", outcome.String("released"), keptAttr.Bool(true)); n != 3 {
			t.Errorf("labelled %v: hold.duration{released, kept=true} = %d values, want 3 (Hold, Keep, Do)", labelled, n)
		}
	}
}
