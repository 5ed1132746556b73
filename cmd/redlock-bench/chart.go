//go:build charts

package main

import (
	"fmt"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chartsBuilt: -chart works in this build (extras.go).
const chartsBuilt = true

// cdfPoints is the most points one CDF line gets; more only grows the file.
const cdfPoints = 400

// cdf returns up to cdfPoints points of the empirical CDF of sorted,
// keeping the first and last sample; skip drops values a log axis cannot
// show.
func cdf(sorted []float64, positiveOnly bool) plotter.XYs {
	if positiveOnly {
		i := 0
		for i < len(sorted) && sorted[i] <= 0 {
			i++
		}
		sorted = sorted[i:]
	}
	n := len(sorted)
	if n == 0 {
		return nil
	}
	k := min(n, cdfPoints)
	pts := make(plotter.XYs, 0, k)
	for j := range k {
		idx := j * (n - 1) / max(k-1, 1)
		pts = append(pts, plotter.XY{X: sorted[idx], Y: float64(idx+1) / float64(n)})
	}
	return pts
}

// writeChart writes an SVG with, per scenario, the CDF of acquire latency
// (log scale) and of validity left at acquisition ÷ TTL, one line per
// implementation, for the largest worker count the scenario ran with (a
// -workers sweep is charted at its largest count only). An implementation
// with no samples gets a legend entry and no line. The SVG references
// nothing outside itself.
func writeChart(path string, rep *Report) error {
	var scs []string
	workers := map[string]int{} // scenario → the largest worker count it ran with
	for _, s := range rep.Scenarios {
		for _, r := range rep.Results {
			if r.Scenario != s.Name {
				continue
			}
			if _, ok := workers[s.Name]; !ok {
				scs = append(scs, s.Name)
			}
			workers[s.Name] = max(workers[s.Name], r.Workers)
		}
	}
	if len(scs) == 0 {
		return fmt.Errorf("-chart: no results to draw")
	}
	rows := make([][]*plot.Plot, len(scs))
	for i, sc := range scs {
		title := fmt.Sprintf("%s, %d workers", sc, workers[sc])
		lat := plot.New()
		lat.Title.Text = title + ": acquire latency (CDF)"
		lat.X.Label.Text = "ms (log scale)"
		lat.Y.Label.Text = "fraction of acquisitions"
		lat.X.Scale = plot.LogScale{}
		lat.X.Tick.Marker = plot.LogTicks{Prec: -1}
		lat.Y.Min, lat.Y.Max = 0, 1
		lat.Legend.Top = false
		lat.Legend.Left = false

		val := plot.New()
		val.Title.Text = title + ": validity left at acquisition ÷ TTL (CDF)"
		val.X.Label.Text = "validity ÷ TTL"
		val.Y.Label.Text = "fraction of acquisitions"
		val.Y.Min, val.Y.Max = 0, 1
		val.Legend.Top = true
		val.Legend.Left = true

		k := 0
		for _, r := range rep.Results {
			if r.Scenario != sc || r.Workers != workers[sc] {
				continue
			}
			if err := addLine(lat, k, r.Impl, cdf(r.acquireSorted, true)); err != nil {
				return err
			}
			if err := addLine(val, k, r.Impl, cdf(r.validitySorted, false)); err != nil {
				return err
			}
			k++
		}
		logRange(&lat.X)
		rows[i] = []*plot.Plot{lat, val}
	}

	const tileW, tileH = 7 * vg.Inch, 4 * vg.Inch
	c := vgsvg.New(2*tileW, vg.Length(len(scs))*tileH)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(scs), Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 4,
		PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j, p := range rows[i] {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-chart: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("-chart: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("-chart: %w", err)
	}
	return nil
}

// logRange makes a log axis's range drawable: gonum/plot panics ("Values
// must be greater than 0 for a log scale") on a range that is empty (no
// line on the plot: every implementation had no samples) or a single value
// (it widens that by ±1, below zero for values under 1).
func logRange(a *plot.Axis) {
	switch {
	case math.IsInf(a.Min, 0) || math.IsInf(a.Max, 0) || a.Min <= 0 || a.Max < a.Min:
		a.Min, a.Max = 0.1, 10 // nothing to draw: any positive range will do
	case a.Min == a.Max:
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// addLine adds one implementation's CDF, or only its legend entry marked
// "no samples" when it has none (a collapsed implementation must still
// show up).
func addLine(p *plot.Plot, k int, name string, pts plotter.XYs) error {
	if len(pts) == 0 {
		l, err := plotter.NewLine(plotter.XYs{})
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(k)
		p.Legend.Add(name+" (no samples)", l)
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(k)
	l.Dashes = plotutil.Dashes(k)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
