package redlock

import "context"

// noteShortValidity counts an acquisition left with less than half its
// TTL, and logs the first one per resource label: the round, the drift
// and SafetyMargin took more than half the TTL, so the holder has little
// time to work and a kept lock's keeper little room (docs/choosing.md,
// "Sizing a TTL").
func (l *Locker) noteShortValidity(ctx context.Context, resource string, info Acquisition) {
	if info.Validity >= info.TTL/2 {
		return
	}
	if l.tel.metering() {
		l.tel.short.Add(ctx, 1, l.tel.opts("", "", resource).add...)
	}
	label := ""
	if l.opts.ResourceLabel != nil {
		label = l.opts.ResourceLabel(resource)
	}
	if _, seen := l.shortWarned.LoadOrStore(label, struct{}{}); seen {
		return
	}
	l.log.WarnContext(ctx, "redlock: acquired with less than half the TTL left; choose a longer TTL (docs/choosing.md, Sizing a TTL)",
		l.logResource(resource), "label", label, "ttl", info.TTL, "elapsed", info.Elapsed, "drift", info.Drift, "safety_margin", info.SafetyMargin, "validity", info.Validity)
}
