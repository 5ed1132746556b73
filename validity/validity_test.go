package validity_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/validity"
	"go.uber.org/goleak"
)

const ms = time.Millisecond

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4, 0: 1, -3: 1} {
		if got := validity.Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

// The worked numbers of docs/design.md §2, to the nanosecond.
func TestWorkedNumbers(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		b                      validity.Budget
		elapsed                time.Duration
		wantDrift, wantValid   time.Duration
		wantAcquisitionIsValid bool
	}{
		{"defaults, elapsed 0", validity.Budget{TTL: 10000 * ms, DriftFactor: 0.01, DriftConstant: 2 * ms},
			0, 102 * ms, 9898 * ms, true},
		{"no factor, 50ms constant, 100ms margin, elapsed 120ms",
			validity.Budget{TTL: 10000 * ms, DriftFactor: 0, DriftConstant: 50 * ms, SafetyMargin: 100 * ms},
			120 * ms, 50 * ms, 9730 * ms, true},
		{"elapsed exactly at the window", validity.Budget{TTL: 10000 * ms, DriftFactor: 0.01, DriftConstant: 2 * ms},
			9898 * ms, 102 * ms, 0, false},
		{"elapsed past the window", validity.Budget{TTL: 10000 * ms, DriftFactor: 0.01, DriftConstant: 2 * ms, SafetyMargin: 8 * ms},
			9891 * ms, 102 * ms, -1 * ms, false},
		{"1s TTL defaults", validity.Budget{TTL: 1000 * ms, DriftFactor: 0.01, DriftConstant: 2 * ms},
			5 * ms, 12 * ms, 983 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tc.b.Drift(); got != tc.wantDrift {
				t.Errorf("Drift = %v, want %v", got, tc.wantDrift)
			}
			got := tc.b.Validity(tc.elapsed)
			if got != tc.wantValid {
				t.Errorf("Validity(%v) = %v, want %v", tc.elapsed, got, tc.wantValid)
			}
			if (got > 0) != tc.wantAcquisitionIsValid {
				t.Errorf("Validity(%v) > 0 is %v, want %v", tc.elapsed, got > 0, tc.wantAcquisitionIsValid)
			}
			start := time.Now()
			if d := tc.b.Deadline(start).Sub(start); d != tc.wantValid+tc.elapsed {
				t.Errorf("Deadline − start = %v, want TTL − drift − margin = %v", d, tc.wantValid+tc.elapsed)
			}
		})
	}
}

func TestValidateNamesTheRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    validity.Budget
		rule string
	}{
		{"zero TTL", validity.Budget{}, "TTL 0s must be positive"},
		{"negative TTL", validity.Budget{TTL: -time.Second}, "must be positive"},
		{"factor 1", validity.Budget{TTL: time.Second, DriftFactor: 1}, "DriftFactor 1 must be in [0, 1)"},
		{"factor negative", validity.Budget{TTL: time.Second, DriftFactor: -0.1}, "DriftFactor"},
		{"factor NaN", validity.Budget{TTL: time.Second, DriftFactor: math.NaN()}, "DriftFactor"},
		{"negative constant", validity.Budget{TTL: time.Second, DriftConstant: -1}, "DriftConstant"},
		{"negative margin", validity.Budget{TTL: time.Second, SafetyMargin: -1}, "SafetyMargin -1ns must not be negative"},
		{"TTL equal to drift plus margin", validity.Budget{TTL: 100 * ms, DriftFactor: 0.5, SafetyMargin: 50 * ms}, "must exceed drift"},
		{"huge constant", validity.Budget{TTL: time.Second, DriftConstant: math.MaxInt64}, "must exceed drift"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			if !errors.Is(err, validity.ErrInvalidBudget) {
				t.Fatalf("Validate = %v, want ErrInvalidBudget", err)
			}
			if !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("Validate = %q, want it to name %q", err, tc.rule)
			}
		})
	}
}

// FuzzBudget checks, over arbitrary valid budgets, that validity never
// exceeds the TTL or the window, is never positive at or past the window,
// equals window − elapsed inside it, that drift is at least DriftConstant,
// and that the deadline never moves back when start moves forward.
func FuzzBudget(f *testing.F) {
	f.Add(int64(10*time.Second), 0.01, int64(2*ms), int64(0), int64(120*ms), int64(5*ms))
	f.Add(int64(time.Second), 0.5, int64(0), int64(400*ms), int64(time.Second), int64(-1))
	f.Add(int64(math.MaxInt64), 0.999, int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, ttl int64, factor float64, constant, margin, elapsed, dstart int64) {
		b := validity.Budget{TTL: time.Duration(ttl), DriftFactor: factor,
			DriftConstant: time.Duration(constant), SafetyMargin: time.Duration(margin)}
		if b.Validate() != nil {
			return
		}
		e := time.Duration(elapsed)
		v := b.Validity(e)
		if v > b.TTL {
			t.Fatalf("Validity(%v) = %v exceeds TTL %v", e, v, b.TTL)
		}
		if v > b.TTL-b.Drift()-b.SafetyMargin {
			t.Fatalf("Validity(%v) = %v exceeds the window", e, v)
		}
		if e >= b.TTL-b.Drift()-b.SafetyMargin && v > 0 {
			t.Fatalf("Validity(%v) = %v positive past the window %v", e, v, b.Window())
		}
		if e > 0 && e < b.Window() && v != b.Window()-e {
			t.Fatalf("Validity(%v) = %v, want %v", e, v, b.Window()-e)
		}
		if b.Drift() < b.DriftConstant {
			t.Fatalf("Drift %v below DriftConstant %v", b.Drift(), b.DriftConstant)
		}
		s1 := time.Unix(0, 0)
		s2 := s1.Add(time.Duration(dstart))
		if dstart >= 0 && b.Deadline(s2).Before(b.Deadline(s1)) {
			t.Fatalf("Deadline not monotone in start")
		}
	})
}

// The defaults are the reference implementation's, and give design.md §2's
// worked drift for a 10 s TTL: 10 s × 0.01 + 2 ms = 102 ms.
func TestDefaultsGiveTheWorkedDrift(t *testing.T) {
	b := validity.Budget{TTL: 10 * time.Second, DriftFactor: validity.DefaultDriftFactor, DriftConstant: validity.DefaultDriftConstant}
	if got := b.Drift(); got != 102*ms {
		t.Fatalf("Drift with the defaults = %v, want 102ms", got)
	}
}
