package main

import (
	"testing"
	"time"
)

// Fairness across workers is the fewest acquisitions of one worker ÷ the
// most; the retaken share counts acquisitions right after the same
// worker's release.
func TestWorkerFairnessAndRetaken(t *testing.T) {
	recs := []*recorder{
		{acquire: make([]time.Duration, 8), retaken: 6},
		{acquire: make([]time.Duration, 2)},
	}
	if f := fairness(recs, 1); f == nil || *f != 0.25 {
		t.Errorf("fairness %v, want 0.25", f)
	}
	if r := retakenShare(recs); r == nil || *r != 0.6 {
		t.Errorf("retaken %v, want 0.6", r)
	}
	if r := retakenShare([]*recorder{{}}); r != nil {
		t.Errorf("retaken of no acquisitions: %v, want nil", *r)
	}
}
