package validity

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Default drift parameters, taken from antirez's reference implementation
// redlock-rb (CLOCK_DRIFT_FACTOR = 0.01, plus 2 ms for the TTL's own
// millisecond resolution).
const (
	DefaultDriftFactor   = 0.01
	DefaultDriftConstant = 2 * time.Millisecond
)

// ErrInvalidBudget is the error every Validate failure wraps.
var ErrInvalidBudget = errors.New("validity: invalid budget")

// Majority returns the number of nodes that form a majority of n: n/2 + 1.
// It is 1, 2, 2, 3, 3 for n = 1..5. For n ≤ 0 it returns 1, so that a
// quorum over no nodes can never be reached.
func Majority(n int) int {
	if n < 0 {
		n = 0
	}
	return n/2 + 1
}

// Budget is the time budget of one lease. The zero value is not valid: call
// Validate before relying on the other methods.
type Budget struct {
	// TTL is the lease's time to live on each master.
	TTL time.Duration
	// DriftFactor is the relative clock-rate error allowed between the
	// client and any master, in [0, 1).
	DriftFactor float64
	// DriftConstant is added to the drift allowance (the TTL's resolution
	// on the master, and scheduling noise).
	DriftConstant time.Duration
	// SafetyMargin is subtracted from the validity as well: time the
	// holder keeps in reserve to finish or abandon its work.
	SafetyMargin time.Duration
}

// Validate reports the first rule the budget breaks, naming it.
func (b Budget) Validate() error {
	switch {
	case b.TTL <= 0:
		return fmt.Errorf("%w: TTL %v must be positive", ErrInvalidBudget, b.TTL)
	case math.IsNaN(b.DriftFactor) || b.DriftFactor < 0 || b.DriftFactor >= 1:
		return fmt.Errorf("%w: DriftFactor %v must be in [0, 1)", ErrInvalidBudget, b.DriftFactor)
	case b.DriftConstant < 0:
		return fmt.Errorf("%w: DriftConstant %v must not be negative", ErrInvalidBudget, b.DriftConstant)
	case b.SafetyMargin < 0:
		return fmt.Errorf("%w: SafetyMargin %v must not be negative", ErrInvalidBudget, b.SafetyMargin)
	}
	if b.Window() <= 0 {
		return fmt.Errorf("%w: TTL %v must exceed drift %v + SafetyMargin %v, or no acquisition could ever be valid",
			ErrInvalidBudget, b.TTL, b.Drift(), b.SafetyMargin)
	}
	return nil
}

// Drift is the clock-drift allowance: TTL × DriftFactor, rounded up to the
// nanosecond, plus DriftConstant. Rounding up keeps the allowance on the safe
// side; for the default 0.01 and whole-millisecond TTLs the product is exact.
func (b Budget) Drift() time.Duration {
	f := float64(b.TTL) * b.DriftFactor
	// 0.01 is not exact in binary; shave float noise (far below 1 ns)
	// before rounding up so that 10 s × 0.01 stays exactly 100 ms.
	return add(time.Duration(math.Ceil(f-f*1e-12)), b.DriftConstant)
}

// Window is the longest an acquisition may take and still be valid:
// TTL − drift − SafetyMargin.
func (b Budget) Window() time.Duration {
	return sub(sub(b.TTL, b.Drift()), b.SafetyMargin)
}

// Validity is the time a lock is still safely held after an acquisition
// that took elapsed: TTL − elapsed − drift − SafetyMargin. It is positive
// only when elapsed < Window(). A negative elapsed (impossible on a
// monotonic clock) counts as zero, so Validity never exceeds the window.
func (b Budget) Validity(elapsed time.Duration) time.Duration {
	if elapsed < 0 {
		elapsed = 0
	}
	return sub(b.Window(), elapsed)
}

// Deadline is the instant after which a lock acquired by a round that
// started at start must be treated as lost: start + TTL − drift −
// SafetyMargin. Pass a monotonic reading (time.Now) as start.
func (b Budget) Deadline(start time.Time) time.Time {
	return start.Add(b.Window())
}

// add and sub saturate instead of wrapping, so that absurd inputs (which
// Validate rejects) still give answers on the safe side rather than a
// validity that wrapped around to a large positive value.
func add(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func sub(a, b time.Duration) time.Duration {
	if b == math.MinInt64 {
		return add(add(a, math.MaxInt64), 1)
	}
	return add(a, -b)
}
