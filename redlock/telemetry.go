package redlock

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlab/redlock/quorum"
)

// A Locker's telemetry (docs/design.md §15): what each operation
// records; telemetry_state.go holds its names and instruments,
// telemetry_setup.go makes them.

// metering reports whether metrics can be recorded now.
func (t *telemetry) metering() bool {
	return t != nil && !t.noMeter && (t.globalMP == nil || otel.GetMeterProvider() != t.globalMP)
}

// tracing reports whether spans can be recorded now.
func (t *telemetry) tracing() bool {
	return t != nil && !t.noTrace && (t.globalTP == nil || otel.GetTracerProvider() != t.globalTP)
}

// resourceAttrs is the bounded label for resource, if the user asked for
// one.
func (t *telemetry) resourceAttrs(resource string) []attribute.KeyValue {
	if t.label == nil {
		return nil
	}
	return []attribute.KeyValue{attrLabel.String(t.label(resource))}
}

// start opens the span of one public operation. With a no-op tracer it
// costs next to nothing; attributes are only built for a recording span.
func (t *telemetry) start(ctx context.Context, op, resource string) (context.Context, opSpan) {
	if !t.tracing() {
		return ctx, opSpan{}
	}
	ctx, span := t.tracer.Start(ctx, t.spanNames[op], spanOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrOp.String(op))
		span.SetAttributes(t.resourceAttrs(resource)...)
	}
	return ctx, opSpan{span: span, resource: resource, label: t.label}
}

// opSpan is the span of one operation on resource (span nil when not
// tracing), so that end can take the name out of an error's text.
type opSpan struct {
	span     trace.Span
	resource string
	label    func(string) string
}

// end records err on s, the resource's name replaced (redact), and ends it.
func end(s opSpan, err error) {
	if s.span == nil {
		return
	}
	if err != nil && s.span.IsRecording() {
		msg := redact(err.Error(), s.resource, s.label)
		s.span.AddEvent("exception", trace.WithAttributes(
			attrExcType.String(reflect.TypeOf(err).String()), attrExcMessage.String(msg)))
		s.span.SetStatus(codes.Error, msg)
	}
	s.span.End()
}

// round records one round's per-master outcomes and latencies, and, on a
// recording span, one event per master.
func (t *telemetry) round(ctx context.Context, l *Locker, op string, res quorum.Result) {
	if t == nil {
		return
	}
	if t.metering() {
		for i, r := range res.Replies {
			t.callCount[i][min(int(r.Outcome), len(t.callCount[i])-1)].Add(1)
			// Latencies of the rounds that take a lock or keep it (not of
			// releases, which would double the cost for little more news,
			// nor of an election's publications and readings).
			if op != "release" && op != "proclaim" && op != "leader" && r.Outcome != quorum.Unavailable && r.Outcome != quorum.Pending {
				t.callDur.Record(context.Background(), r.Latency.Seconds(), t.master[i]...)
			}
		}
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	for i, r := range res.Replies {
		span.AddEvent("redlock.master", trace.WithAttributes(
			attrOp.String(op), attrMaster.String(l.addrs[i]),
			attrOutcome.String(r.Outcome.String()), attrLatency.Float64(r.Latency.Seconds())))
	}
}

// opts returns the attribute options for key=value (none when key is
// empty) and the resource's label, if the user maps resources to labels;
// precomputed when there is no label.
func (t *telemetry) opts(key attribute.Key, value, resource string) optSet {
	var attrs []attribute.KeyValue
	if t.label == nil {
		if key == "" {
			return t.noAttrs
		}
		if o, ok := t.outcomeOpt[value]; ok && key == attrOutcome {
			return o
		}
	} else {
		attrs = t.resourceAttrs(resource)
	}
	if key != "" {
		attrs = append(attrs, key.String(value))
	}
	return newOptSet(attrs...)
}

// acquired records the outcome of one acquisition round.
func (t *telemetry) acquired(ctx context.Context, resource, outcome string, info Acquisition, fence uint64) {
	if t == nil {
		return
	}
	if t.metering() {
		t.acquireDur.Record(ctx, info.Elapsed.Seconds(), t.opts(attrOutcome, outcome, resource).rec...)
		if outcome == outAcquired {
			none := t.opts("", "", resource)
			t.validity.Record(ctx, info.Validity.Seconds(), none.rec...)
			if t.held == nil {
				t.heldCount.Add(1)
			} else {
				t.held.Add(ctx, 1, none.add...)
			}
		}
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome), attrElapsed.Float64(info.Elapsed.Seconds()),
			attrDrift.Float64(info.Drift.Seconds()), attrMargin.Float64(info.SafetyMargin.Seconds()),
			attrValidity.Float64(info.Validity.Seconds()))
		if fence > 0 {
			span.SetAttributes(attrFence.Int64(int64(min(fence, 1<<63-1))))
		}
	}
}

// lostLease counts a lease lost for reason.
func (t *telemetry) lostLease(ctx context.Context, resource, reason string) {
	if !t.metering() {
		return
	}
	t.lost.Add(ctx, 1, t.opts(attrReason, reason, resource).add...)
}

// newStaleCounter makes the counter of stale fenced writes on m: the
// Locker's meter, or the global one for a write with no lock known.
func newStaleCounter(m metric.Meter) (metric.Int64Counter, error) {
	return m.Int64Counter("redlock.fenced_writes.stale", metric.WithUnit("{write}"),
		metric.WithDescription("Writes WriteFenced rejected as stale: a later holder had written."))
}

// staleWrite counts one fenced write of lk's rejected as stale.
func (t *telemetry) staleWrite(ctx context.Context, resource string) {
	if t.metering() {
		t.stale.Add(ctx, 1, t.opts("", "", resource).add...)
	}
}

// extension counts one extension with its outcome.
func (t *telemetry) extension(ctx context.Context, outcome, resource string) {
	if t.metering() {
		t.extensions.Add(ctx, 1, t.opts(attrOutcome, outcome, resource).add...)
	}
}

// released counts one release round: not_ours when too many masters hold
// another owner's token for the lock to have held a majority, deferred
// when a master has yet to get it, else released.
func (t *telemetry) released(ctx context.Context, resource string, res quorum.Result, need int) {
	if !t.metering() {
		return
	}
	k := 0 // released
	switch {
	case res.Count(quorum.Refused) > len(res.Replies)-need:
		k = 2 // not_ours
	case res.Count(quorum.TimedOut) > 0 || slices.ContainsFunc(res.Replies, func(r quorum.Reply) bool { return r.Err == errDeferred }):
		k = 1 // deferred
	}
	if t.releases == nil {
		t.releaseCount[k].Add(1)
		return
	}
	t.releases.Add(ctx, 1, t.opts(attrOutcome, releaseOutcomes[k], resource).add...)
}

func (t *telemetry) lockAttempts(ctx context.Context, n int, resource string) {
	if t.metering() {
		t.attempts.Record(ctx, int64(n), t.opts("", "", resource).rec...)
	}
}

func (t *telemetry) unlocked(ctx context.Context, resource string) {
	if !t.metering() {
		return
	}
	if t.held == nil {
		t.heldCount.Add(-1)
		return
	}
	t.held.Add(ctx, -1, t.opts("", "", resource).add...)
}

// hold starts lk's hold time, and lists it as held.
func (t *telemetry) hold(lk *Lock) {
	if !t.metering() {
		return
	}
	e := &holdEntry{}
	lk.hold = e
	s := &t.holding[t.nextShard.Add(1)%holdShards]
	s.mu.Lock()
	e.shard, e.at = s, t.env.now()
	e.prev, e.next = s.head.prev, &s.head
	e.prev.next, s.head.prev = e, e
	s.mu.Unlock()
}

func (t *telemetry) unlist(e *holdEntry) {
	s := e.shard
	if s == nil {
		return
	}
	s.mu.Lock()
	if e.next != nil {
		e.prev.next, e.next.prev = e.next, e.prev
		e.prev, e.next = nil, nil
	}
	s.mu.Unlock()
}

// oldestAge is the age of the oldest listed lock, or 0.
func (t *telemetry) oldestAge() time.Duration {
	var oldest time.Time
	for i := range t.holding {
		s := &t.holding[i]
		s.mu.Lock()
		if first := s.head.next; first != &s.head && (oldest.IsZero() || first.at.Before(oldest)) {
			oldest = first.at
		}
		s.mu.Unlock()
	}
	if oldest.IsZero() {
		return 0
	}
	return t.env.now().Sub(oldest)
}

// unlockedHold ends lk's hold at Unlock (err is Unlock's): it takes lk
// off the list of held locks and records its hold time.
func (t *telemetry) unlockedHold(ctx context.Context, lk *Lock, err error) {
	if t != nil && lk.hold != nil {
		t.unlist(lk.hold)
		t.holdEnded(ctx, lk, err)
	}
}

// holdEnded records lk's hold time, once: lost when err is ErrLost (its
// deadline passed, or another owner took it), else released.
func (t *telemetry) holdEnded(ctx context.Context, lk *Lock, err error) {
	e := lk.hold
	if e == nil || !t.metering() || e.at.IsZero() || e.ended.Swap(true) {
		return
	}
	o, kept := 0, e.kept.Load()
	if errors.Is(err, ErrLost) {
		o = 1
	}
	var opts []metric.RecordOption
	if t.label == nil {
		opts = t.holdOpt[o][b2i(kept)]
	} else {
		attrs := append(t.resourceAttrs(lk.resource), attrOutcome.String(holdOutcomes[o]), attrKept.Bool(kept))
		opts = newOptSet(attrs...).rec
	}
	t.holdDur.Record(ctx, t.env.now().Sub(e.at).Seconds(), opts...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
