// Package validity is the arithmetic of a Redlock lease: the majority size,
// the clock-drift allowance, the validity left after an acquisition and the
// deadline after which the lock must be treated as lost.
//
// It is pure: standard-library time only, no I/O, no goroutines, no wall
// clock. Callers take their readings from Go's monotonic clock (time.Now,
// time.Since) before the first request is sent and at the quorum decision.
//
// The formulas, worked through in docs/design.md §2:
//
//	drift    = TTL × DriftFactor + DriftConstant
//	validity = TTL − elapsed − drift − SafetyMargin
//	deadline = start + TTL − drift − SafetyMargin
//
// The guarantee they give rests on assumptions that no arithmetic can check:
// every master's clock advances at a rate within DriftFactor of the client's
// (no jumps), and the client's process is not paused between reading the
// clock and acting on the lock for longer than SafetyMargin allows. A master
// whose clock jumps forward expires keys early; a client paused past its
// deadline still believes it holds the lock. Fencing tokens (package redlock)
// are the defence against the second.
package validity
