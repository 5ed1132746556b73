package redlock

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlab/redlock/quorum"
)

// Setting up a Locker's telemetry (docs/design.md §15): its instruments
// and spans' names, made once in New, the observed instruments' callback,
// and its unregistering in Close.

// newTelemetry returns the Locker's instruments, or nil (instrumentation
// off, at no cost at all) when both providers are the OpenTelemetry no-op
// ones (go.opentelemetry.io/otel/metric/noop and .../trace/noop).
func newTelemetry(l *Locker) (*telemetry, error) {
	mp, tp := l.opts.MeterProvider, l.opts.TracerProvider
	_, mnoop := mp.(noopmetric.MeterProvider)
	_, tnoop := tp.(nooptrace.TracerProvider)
	if mnoop && tnoop {
		return nil, nil
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentation)
	t := &telemetry{tracer: tp.Tracer(instrumentation), label: l.opts.ResourceLabel, env: l.env, noMeter: mnoop, noTrace: tnoop}
	if l.opts.MeterProvider == nil && builtinGlobal(mp) {
		t.globalMP = mp
	}
	if l.opts.TracerProvider == nil && builtinGlobal(tp) {
		t.globalTP = tp
	}
	o, err := t.instruments(m)
	if err != nil {
		return nil, err
	}
	t.prepare(l)
	if err := t.observe(m, l, o); err != nil {
		return nil, err
	}
	return t, nil
}

// observables are the instruments observed by the callback that
// telemetry.observe registers.
type observables struct {
	held                     metric.Int64ObservableUpDownCounter // without a ResourceLabel
	releases, calls, dropped metric.Int64ObservableCounter
	deferred, skipped        metric.Int64ObservableGauge
	oldest, ttlGauge         metric.Float64ObservableGauge
}

// instruments creates t's instruments on m, and returns the observed ones.
func (t *telemetry) instruments(m metric.Meter) (observables, error) {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Buckets for lock latencies: 0.1 ms to 10 s.
	secs := metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	var err error
	var o observables
	t.acquireDur, err = m.Float64Histogram("redlock.acquire.duration", metric.WithUnit("s"), secs,
		metric.WithDescription("Time of one acquisition round (TryLock, or one attempt of Lock; and their All forms), by outcome."))
	keep(err)
	t.validity, err = m.Float64Histogram("redlock.acquire.validity", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
		metric.WithDescription("Validity left at a successful acquisition: TTL − elapsed − drift − SafetyMargin."))
	keep(err)
	t.attempts, err = m.Int64Histogram("redlock.lock.attempts", metric.WithUnit("{attempt}"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100),
		metric.WithDescription("Rounds one Lock call made, whatever its outcome."))
	keep(err)
	t.extensions, err = m.Int64Counter("redlock.extensions", metric.WithUnit("{extension}"),
		metric.WithDescription("Extensions, by outcome: extended, failed (no majority; retried while time remains), expired (deadline passed), canceled."))
	keep(err)
	t.lost, err = m.Int64Counter("redlock.leases.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases lost: Do's deadline passed without an extension, or Unlock found the lock expired or held by another owner."))
	keep(err)
	t.short, err = m.Int64Counter("redlock.acquire.short_validity", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquisitions left with validity under half their TTL: the TTL is too short for the masters' latency, drift and SafetyMargin."))
	keep(err)
	t.stale, err = newStaleCounter(m)
	keep(err)
	const (
		heldName, heldUnit, heldDesc = "redlock.leases.held", "{lease}", "Locks acquired and not yet unlocked (a lock never unlocked stays counted)."
		relName, relUnit, relDesc    = "redlock.releases", "{release}", "Release rounds (Unlock, and cleanup after a failed acquisition), by outcome: released, deferred (a master not answering gets it later), not_ours."
	)
	if t.label != nil {
		t.held, err = m.Int64UpDownCounter(heldName, metric.WithUnit(heldUnit), metric.WithDescription(heldDesc))
		keep(err)
		t.releases, err = m.Int64Counter(relName, metric.WithUnit(relUnit), metric.WithDescription(relDesc))
		keep(err)
	} else {
		o.held, err = m.Int64ObservableUpDownCounter(heldName, metric.WithUnit(heldUnit), metric.WithDescription(heldDesc))
		keep(err)
		o.releases, err = m.Int64ObservableCounter(relName, metric.WithUnit(relUnit), metric.WithDescription(relDesc))
		keep(err)
	}
	o.calls, err = m.Int64ObservableCounter("redlock.master.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Commands to each master, by outcome (ok, refused, failed, timed out, unavailable, canceled, pending)."))
	keep(err)
	t.callDur, err = m.Float64Histogram("redlock.master.duration", metric.WithUnit("s"), secs,
		metric.WithDescription("Latency of each master's replies in acquire and extend rounds, from the start of the round."))
	keep(err)
	o.deferred, err = m.Int64ObservableGauge("redlock.releases.deferred", metric.WithUnit("{release}"),
		metric.WithDescription("Releases waiting for their master to answer again."))
	keep(err)
	o.dropped, err = m.Int64ObservableCounter("redlock.releases.dropped", metric.WithUnit("{release}"),
		metric.WithDescription("Deferred releases given up for room (their keys expire with their TTL)."))
	keep(err)
	o.skipped, err = m.Int64ObservableGauge("redlock.master.skipped", metric.WithUnit("{master}"),
		metric.WithDescription("1 while a master is skipped as not answering (silent for MasterTimeout with commands unanswered), else 0."))
	keep(err)
	t.holdDur, err = m.Float64Histogram("redlock.hold.duration", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
		metric.WithDescription("How long a lock was held, from its acquisition to its release (released) or loss (lost: its deadline passed, or another owner took it)."))
	keep(err)
	o.oldest, err = m.Float64ObservableGauge("redlock.hold.oldest", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest lock acquired and not yet unlocked (a lock never unlocked stays counted), 0 when none."))
	keep(err)
	o.ttlGauge, err = m.Float64ObservableGauge("redlock.ttl", metric.WithUnit("s"),
		metric.WithDescription("The Locker's TTL (Options.TTL; WithTTL may set another per lock)."))
	keep(err)
	if len(errs) > 0 {
		return o, errs[0]
	}
	return o, nil
}

// prepare makes what recording needs ready: the holding lists, the rare
// counters at 0, and the attribute sets recorded with.
func (t *telemetry) prepare(l *Locker) {
	for i := range t.holding {
		h := &t.holding[i].head
		h.prev, h.next = h, h
	}
	if t.label == nil {
		// Counters of rare events start at 0, so that a scrape shows them
		// before the first event and rate() and increase() see it.
		for _, o := range []string{outExtended, outExtFailed, outLapsed, outCanceled} {
			t.extensions.Add(context.Background(), 0, metric.WithAttributes(attrOutcome.String(o)))
		}
		for _, r := range []string{"deadline", "expired_before_unlock", "taken"} {
			t.lost.Add(context.Background(), 0, metric.WithAttributes(attrReason.String(r)))
		}
		t.stale.Add(context.Background(), 0)
	}
	t.noAttrs = newOptSet()
	t.outcomeOpt = map[string]optSet{}
	for _, o := range opOutcomes {
		t.outcomeOpt[o] = newOptSet(attrOutcome.String(o))
	}
	for o, out := range holdOutcomes {
		for k := range 2 {
			t.holdOpt[o][k] = newOptSet(attrOutcome.String(out), attrKept.Bool(k == 1)).rec
		}
	}
	t.spanNames = map[string]string{}
	for _, op := range []string{"TryLock", "Lock", "TryLockAll", "LockAll", "Extend", "Unlock", "Do", "Adopt",
		"TryAcquire", "Acquire", "TryRLock", "RLock", "Campaign", "Proclaim", "Leader"} {
		t.spanNames[op] = "redlock." + op
	}
}

// observe registers the callback that reports o.
func (t *telemetry) observe(m metric.Meter, l *Locker, obs observables) error {
	ttl := l.opts.TTL.Seconds()
	n := len(l.masters)
	t.master = make([][]metric.RecordOption, n)
	t.callOut = make([][]metric.ObserveOption, n)
	t.callCount = make([][quorum.Canceled + 1]atomic.Int64, n)
	masterAttrs := make([]metric.ObserveOption, n)
	for i := range n {
		addr := attrMaster.String(l.addrs[i])
		t.master[i] = newOptSet(addr).rec
		masterAttrs[i] = metric.WithAttributeSet(attribute.NewSet(addr))
		t.callOut[i] = make([]metric.ObserveOption, quorum.Canceled+1)
		for o := range t.callOut[i] {
			t.callOut[i][o] = metric.WithAttributeSet(attribute.NewSet(addr, attrOutcome.String(quorum.Outcome(o).String())))
		}
	}
	relOpts := make([]metric.ObserveOption, len(releaseOutcomes))
	for k, out := range releaseOutcomes {
		relOpts[k] = metric.WithAttributeSet(attribute.NewSet(attrOutcome.String(out)))
	}
	observed := []metric.Observable{obs.deferred, obs.dropped, obs.skipped, obs.calls, obs.oldest, obs.ttlGauge}
	if t.label == nil {
		observed = append(observed, obs.held, obs.releases)
	}
	var err error
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(obs.ttlGauge, ttl)
		o.ObserveFloat64(obs.oldest, t.oldestAge().Seconds())
		if t.label == nil {
			o.ObserveInt64(obs.held, t.heldCount.Load())
			for k := range releaseOutcomes {
				if c := t.releaseCount[k].Load(); c > 0 {
					o.ObserveInt64(obs.releases, c, relOpts[k])
				}
			}
		}
		for i, s := range l.streams {
			st := s.stats()
			o.ObserveInt64(obs.deferred, int64(st.Deferred), masterAttrs[i])
			o.ObserveInt64(obs.dropped, int64(st.Dropped), masterAttrs[i])
			v := int64(0)
			if st.Skipped {
				v = 1
			}
			o.ObserveInt64(obs.skipped, v, masterAttrs[i])
			for out := range t.callCount[i] {
				if c := t.callCount[i][out].Load(); c > 0 {
					o.ObserveInt64(obs.calls, c, t.callOut[i][out])
				}
			}
		}
		return nil
	}, observed...)
	return err
}

// builtinGlobal reports whether p is OpenTelemetry's built-in global
// (delegating, until an SDK is installed) provider. OpenTelemetry exports
// no way to ask, so New asks its type once; records compare providers.
func builtinGlobal(p any) bool {
	rt := reflect.TypeOf(p)
	return rt != nil && rt.Kind() == reflect.Pointer && rt.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

func (t *telemetry) close() {
	if t != nil && t.reg != nil {
		t.reg.Unregister()
	}
}
