//go:build charts

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestChartSkipsEmptySeries: an implementation with no samples gets a
// legend entry and no line, and a latency plot with nothing (or one value
// under 1 ms) to draw does not make gonum/plot panic on its log axis. With
// several worker counts only the largest is drawn.
func TestChartSkipsEmptySeries(t *testing.T) {
	rep := syntheticReport()
	for i := range rep.Results {
		r := &rep.Results[i]
		switch {
		case r.Workers == 1: // charted only if the largest count were 1
			r.acquireSorted, r.validitySorted = []float64{1, 2, 3}, []float64{0.98, 0.99}
		case r.Scenario == "stall" && r.Impl == oursName: // one sample, under 1 ms
			r.acquireSorted, r.validitySorted = []float64{0.5}, []float64{0.99}
		default: // no samples at all (contended at 8 workers: every series empty)
			r.acquireSorted, r.validitySorted = nil, nil
		}
	}
	path := filepath.Join(t.TempDir(), "c.svg")
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("writeChart panicked: %v", p)
			}
		}()
		if err := writeChart(path, rep); err != nil {
			t.Fatal(err)
		}
	}()
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "contended, 8 workers", "stall, 8 workers", "redsync-failfast (no samples)", "redsync (no samples)"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if bytes.Contains(svg, []byte("1 workers")) {
		t.Error("chart draws the smaller worker count too")
	}
}
