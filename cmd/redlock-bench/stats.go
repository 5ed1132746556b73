package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (p in [0, 100]) of
// sorted, which must be in ascending order; 0 for an empty slice. Nearest
// rank reports a value that was actually observed, so "max" and "p100" agree
// and a p99 of 100 samples is the 99th smallest, not an interpolation.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// durationsMs converts to float milliseconds and sorts.
func durationsMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	slices.Sort(out)
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// distOf summarises sorted samples (milliseconds).
func distOf(sorted []float64) Dist {
	d := Dist{Count: len(sorted)}
	if len(sorted) == 0 {
		return d
	}
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	d.Mean = sum / float64(len(sorted))
	d.P50 = percentile(sorted, 50)
	d.P90 = percentile(sorted, 90)
	d.P99 = percentile(sorted, 99)
	d.Max = sorted[len(sorted)-1]
	return d
}

// ratio returns num/den, or nil when den is not positive (a collapsed
// implementation has no finite ratio; JSON shows null, the table "∞").
func ratio(num, den float64) *float64 {
	if den <= 0 {
		return nil
	}
	r := num / den
	return &r
}

// perSecond is n events over d, 0 for an empty interval.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
