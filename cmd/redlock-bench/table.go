package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// oursName is the implementation every ratio puts in the numerator.
const oursName = "redlock"

// computeRatios returns, per scenario and worker count: ours ÷ every other
// implementation for the whole cell and for each phase; and, where a
// scenario has phases, each implementation's phase ÷ its first (healthy)
// phase. Both sides of a ratio always ran with the same worker count.
func computeRatios(results []Result) []Ratio {
	out := []Ratio{}
	type group struct {
		sc      string
		workers int
	}
	byGroup := map[group][]Result{}
	var order []group
	for _, r := range results {
		g := group{r.Scenario, r.Workers}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	for _, g := range order {
		rs := byGroup[g]
		i := slices.IndexFunc(rs, func(r Result) bool { return r.Impl == oursName })
		if i >= 0 {
			ours := rs[i]
			for _, other := range rs {
				if other.Impl == oursName {
					continue
				}
				out = append(out, ratioOf(g.sc, g.workers, side(ours, "all"), side(other, "all")))
				if slices.Contains(mutexRatioScenarios, g.sc) {
					out = append(out, ratioOf(g.sc, g.workers, side(other, "all"), side(ours, "all")))
				}
				if len(ours.Phases) > 1 {
					for _, p := range ours.Phases {
						out = append(out, ratioOf(g.sc, g.workers, side(ours, p.Name), side(other, p.Name)))
					}
				}
			}
		}
		for _, r := range rs {
			if len(r.Phases) < 2 {
				continue
			}
			for _, p := range r.Phases[1:] {
				out = append(out, ratioOf(g.sc, g.workers, side(r, p.Name), side(r, r.Phases[0].Name)))
			}
		}
	}
	return out
}

func side(r Result, phase string) Side {
	s := Side{Impl: r.Impl, Phase: phase}
	if phase == "all" {
		s.OpsPerSec = r.OpsPerSec
		return s
	}
	for _, p := range r.Phases {
		if p.Name == phase {
			s.OpsPerSec = p.OpsPerSec
		}
	}
	return s
}

func ratioOf(sc string, workers int, num, den Side) Ratio {
	return Ratio{Scenario: sc, Workers: workers, Numerator: num, Denominator: den, Value: ratio(num.OpsPerSec, den.OpsPerSec)}
}

// findRatio returns the ratio with the given sides in scenario sc with the
// given worker count, if computed.
func findRatio(rs []Ratio, sc string, workers int, numImpl, numPhase, denImpl, denPhase string) (Ratio, bool) {
	for _, r := range rs {
		if r.Scenario == sc && r.Workers == workers && r.Numerator.Impl == numImpl && r.Numerator.Phase == numPhase &&
			r.Denominator.Impl == denImpl && r.Denominator.Phase == denPhase {
			return r, true
		}
	}
	return Ratio{}, false
}

func fmtRatio(r Ratio) string {
	switch {
	case r.Value != nil:
		return fmt.Sprintf("%.2f×", *r.Value)
	case r.Numerator.OpsPerSec > 0:
		return "∞ (0 ops)"
	}
	return "n/a (0/0)"
}

// fmtMs prints milliseconds with about three significant digits.
func fmtMs(v float64) string { return fmtNum(v) }

// fmtNum prints a non-negative number with about three significant digits.
func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtFailures(f map[string]int64) string {
	if len(f) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, f[k]))
	}
	return strings.Join(parts, " ")
}

// summaryAgainst is the implementation the per-scenario summary lines
// compare ours with, worker count by worker count.
const summaryAgainst = "redsync-failfast"

// fmtWorkers prints the worker counts for the header: "8 workers", or
// "workers 1,8,64" for a sweep.
func fmtWorkers(ws []int) string {
	if len(ws) == 1 {
		return fmt.Sprintf("%d workers", ws[0])
	}
	parts := make([]string, len(ws))
	for i, n := range ws {
		parts[i] = fmt.Sprint(n)
	}
	return "workers " + strings.Join(parts, ",")
}

// summaryLines returns, per scenario where both ran with at least one
// worker count, ours ÷ summaryAgainst throughput and acquire p50 for each
// worker count, e.g.
//
//	uncontended: redlock ÷ redsync-failfast  1w 1.05× (p50 0.93×)  8w 3.40× (p50 0.31×)
//
// On one shared resource (a handoff was measured) the acquire p99, each
// side's fairness across workers and share of acquisitions retaken by the
// releaser come before the p50, and a line after them says why a p50
// alone misleads there:
//
//	contended: redlock ÷ redsync-failfast  8w 1.28× (p99 0.09×, fairness 0.85 against 0.10, retaken 2% against 91%; p50 48.4×)
func summaryLines(rep *Report) []string {
	var out []string
	contended := false
	for _, s := range rep.Scenarios {
		var parts []string
		for _, w := range rep.Config.Workers {
			ours, ok1 := findResult(rep.Results, s.Name, w, oursName)
			them, ok2 := findResult(rep.Results, s.Name, w, summaryAgainst)
			if !ok1 || !ok2 {
				continue
			}
			thr := "n/a"
			if x, ok := findRatio(rep.Ratios, s.Name, w, oursName, "all", summaryAgainst, "all"); ok {
				thr = fmtRatio(x)
			}
			p50, p99 := latencyRatio(ours, them, func(d Dist) float64 { return d.P50 }), latencyRatio(ours, them, func(d Dist) float64 { return d.P99 })
			if ours.HandoffMs == nil && them.HandoffMs == nil {
				parts = append(parts, fmt.Sprintf("%dw %s (p50 %s)", w, thr, p50))
				continue
			}
			contended = true
			parts = append(parts, fmt.Sprintf("%dw %s (p99 %s%s; p50 %s)", w, thr, p99, sharedFigures(ours, them), p50))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s: %s ÷ %s  %s", s.Name, oursName, summaryAgainst, strings.Join(parts, "  ")))
		}
	}
	if contended {
		out = append(out, "(one shared resource: a lock that lets its releaser take it straight back (retaken) has a low acquire p50, since the releaser\n"+
			" waits for nobody, while the other workers wait longer (p99) and acquire less (fairness: fewest ÷ most acquisitions of a worker);\n"+
			" compare throughput, p99 and fairness, not p50)")
	}
	return out
}

// sharedFigures is ", fairness X against Y, retaken A% against B%" for
// two shared-resource cells, each part only where both sides have it.
func sharedFigures(ours, them Result) string {
	out := ""
	if ours.WorkerFairness != nil && them.WorkerFairness != nil {
		out += fmt.Sprintf(", fairness %.2f against %.2f", *ours.WorkerFairness, *them.WorkerFairness)
	}
	if ours.RetakenShare != nil && them.RetakenShare != nil {
		out += fmt.Sprintf(", retaken %.0f%% against %.0f%%", 100**ours.RetakenShare, 100**them.RetakenShare)
	}
	return out
}

// latencyRatio is ours ÷ them of one statistic of the acquire latency,
// formatted ("n/a" when either side acquired nothing).
func latencyRatio(ours, them Result, stat func(Dist) float64) string {
	if ours.AcquireMs.Count > 0 && them.AcquireMs.Count > 0 {
		if x := ratio(stat(ours.AcquireMs), stat(them.AcquireMs)); x != nil {
			return fmt.Sprintf("%.2f×", *x)
		}
	}
	return "n/a"
}

// mutexLines returns, for the scenarios that run a primitive beside the
// mutex, one line per worker count with each primitive ÷ the mutex, e.g.
//
//	semaphore 64w: ÷ redlock (mutex)  redlock-sem1 0.91×  redlock-sem3 2.10×  redlock-sem8 4.02×
func mutexLines(rep *Report) []string {
	var out []string
	for _, s := range rep.Scenarios {
		if !slices.Contains(mutexRatioScenarios, s.Name) {
			continue
		}
		for _, w := range rep.Config.Workers {
			var parts []string
			for _, r := range rep.Results {
				if r.Scenario != s.Name || r.Workers != w || r.Impl == oursName {
					continue
				}
				if x, ok := findRatio(rep.Ratios, s.Name, w, r.Impl, "all", oursName, "all"); ok {
					parts = append(parts, r.Impl+" "+fmtRatio(x))
				}
			}
			if len(parts) > 0 {
				out = append(out, fmt.Sprintf("%s %dw: ÷ %s (mutex)  %s", s.Name, w, oursName, strings.Join(parts, "  ")))
			}
		}
	}
	return out
}

func findResult(rs []Result, sc string, workers int, impl string) (Result, bool) {
	for _, r := range rs {
		if r.Scenario == sc && r.Workers == workers && r.Impl == impl {
			return r, true
		}
	}
	return Result{}, false
}

// renderTable writes the human report: a header naming the masters, one
// row per cell, a summary line per scenario, then the phase table, the
// handoff table and the ratios. Every ratio compares cells of the same
// scenario and worker count.
func renderTable(w io.Writer, rep *Report) error {
	renderHeader(w, rep)
	if len(rep.Results) > 0 { // none when only the election scenarios ran
		if err := renderResults(w, rep); err != nil {
			return err
		}
	}
	renderSummaries(w, rep)
	for _, s := range rep.Scenarios { // phases, for scenarios that have them
		if err := renderPhases(w, rep, s); err != nil {
			return err
		}
	}
	if err := renderHandoff(w, rep); err != nil {
		return err
	}
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s/%s/%dw: %s\n", r.Scenario, r.Impl, r.Workers, n)
		}
	}
	if err := renderElections(w, rep.Elections); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwall time %.1fs\n", rep.WallSeconds)
	return nil
}

// renderHeader writes the report's first lines: the masters, the run's
// settings and environment, and the scenarios not run.
func renderHeader(w io.Writer, rep *Report) {
	m := rep.Masters
	fmt.Fprintf(w, "redlock-bench: %d %s masters · %s · %v per cell · TTL %v · %s/%s, %d CPUs, %s\n",
		m.N, m.Kind, fmtWorkers(rep.Config.Workers), time.Duration(rep.Config.DurationSeconds*float64(time.Second)),
		time.Duration(rep.Config.TTLMs)*time.Millisecond, rep.Env.GOOS, rep.Env.GOARCH, rep.Env.CPUs, rep.Env.GoVersion)
	fmt.Fprintf(w, "masters: %s\nstall:   %s\n", m.Note, m.StallMethod)
	if m.PartitionMethod != "" {
		fmt.Fprintf(w, "partition: %s\n", m.PartitionMethod)
	}
	if e := rep.Etcd; e != nil {
		fmt.Fprintf(w, "etcd:    %s\n", e.Note)
	}
	if n := rep.Config.Lockers; n > 1 {
		fmt.Fprintf(w, "lockers: %d per cell, each with its own clients and the workers count (a cell has %d × workers goroutines)\n", n, n)
	}
	if m.Kind == "embedded" {
		fmt.Fprintln(w, "NOTE:    EMBEDDED MASTERS — these figures are library overhead over miniredis on loopback, not Redis over a network.")
	}
	for _, s := range rep.Scenarios {
		if !s.Available {
			fmt.Fprintf(w, "not run: %s (%s)\n", s.Name, s.Unavailable)
		}
	}
	fmt.Fprintln(w)
}

// renderResults writes the table of cells, one row per result, and its
// legend.
func renderResults(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworkers\timpl\tops/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tvalid min\tp1\tp50\telapsed\tdrift\tmargin\tcmd/acq\tredlock ÷\tfailures\tclient µs/acq\tserver µs/acq\tfloor µs/acq\t")
	for _, r := range rep.Results {
		ratio := ""
		if r.Impl != oursName {
			if x, ok := findRatio(rep.Ratios, r.Scenario, r.Workers, oursName, "all", r.Impl, "all"); ok {
				ratio = fmtRatio(x)
			}
		}
		v := r.Validity
		valid := []string{"-", "-", "-", "-", "-", "-"}
		if v.Count > 0 {
			valid = []string{fmt.Sprintf("%.4f", v.Min), fmt.Sprintf("%.4f", v.P1), fmt.Sprintf("%.4f", v.P50),
				fmtMs(v.ElapsedMsP50), fmtMs(v.DriftMs), fmtMs(v.SafetyMarginMs)}
		}
		a := r.AcquireMs
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Workers, r.Impl, r.OpsPerSec,
			fmtMs(a.P50), fmtMs(a.P90), fmtMs(a.P99), fmtMs(a.Max), strings.Join(valid, "\t"), fmtOpt(r.CommandsPerAcquisition), ratio, fmtFailures(r.Failures),
			fmtOpt(r.ClientCPUUsPerAcquisition), fmtOpt(r.ServerCPUUsPerAcquisition), fmtOpt(r.ServerCommandUsPerAcquisition))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(latency: successful Lock calls, retries included; valid: validity left at acquisition ÷ TTL; elapsed/drift/margin: p50 ms subtracted from the TTL;")
	fmt.Fprintln(w, " cmd/acq: commands the masters executed during the cell ÷ successful Lock calls, from INFO commandstats, - where not reported;")
	fmt.Fprintln(w, " client/server µs/acq: CPU time of this process (getrusage) / of the masters (INFO cpu, summed; embedded: their process's getrusage)\n"+
		"   over the same window ÷ successful Lock calls;")
	fmt.Fprintln(w, " floor µs/acq: the masters' command handlers' time (INFO commandstats usec, summed) ÷ successful Lock calls: their cost without network I/O)")
	return nil
}

// renderSummaries writes each run's ops/s under -repeat, the fairness
// across Lockers under -lockers, and the summary lines per worker count.
func renderSummaries(w io.Writer, rep *Report) {
	if n := rep.Config.Repeat; n > 1 {
		fmt.Fprintf(w, "-repeat %d: every row is the run of median ops/s of %d interleaved runs; ops/s of each run, in run order:\n", n, n)
		for _, r := range rep.Results {
			runs := make([]string, len(r.OpsPerSecRuns))
			for i, x := range r.OpsPerSecRuns {
				runs[i] = fmt.Sprintf("%.0f", x)
			}
			fmt.Fprintf(w, "  %s %dw %s: %s\n", r.Scenario, r.Workers, r.Impl, strings.Join(runs, " "))
		}
	}
	var fair []string
	for _, r := range rep.Results {
		if r.Fairness != nil {
			fair = append(fair, fmt.Sprintf("  %s %dL×%dw %s: fairness %.2f, longest wait %s ms", r.Scenario, r.Lockers, r.Workers, r.Impl, *r.Fairness, fmtMs(r.AcquireMs.Max)))
		}
	}
	if len(fair) > 0 {
		fmt.Fprintf(w, "across Lockers (acquisitions per Locker, min ÷ max; longest single Lock):\n%s\n", strings.Join(fair, "\n"))
	}
	if lines := slices.Concat(summaryLines(rep), mutexLines(rep), sharedLines(rep)); len(lines) > 0 {
		fmt.Fprintf(w, "\nsummary per worker count (Nw): ops/s ratio (p50: acquire-latency p50 ratio, below 1 = ours faster)\n%s\n", strings.Join(lines, "\n"))
	}
}

// renderPhases writes scenario s's ops/s per phase, for each of its
// results, and ours ÷ each other implementation per phase; nothing for a
// scenario of one phase or without results.
func renderPhases(w io.Writer, rep *Report, s ScenarioInfo) error {
	if len(s.Phases) < 2 {
		return nil
	}
	var rows []Result
	for _, r := range rep.Results {
		if r.Scenario == s.Name {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s: ops/s per phase, by completion time\n", s.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"workers", "impl"}
	for _, p := range s.Phases {
		head = append(head, fmt.Sprintf("%s (%.0f–%.0f%%)", p.Name, p.From*100, p.To*100))
	}
	for _, p := range s.Phases[1:] {
		head = append(head, p.Name+" ÷ "+s.Phases[0].Name)
	}
	head = append(head, "late ops")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		cols := []string{fmt.Sprint(r.Workers), r.Impl}
		for _, p := range r.Phases {
			cols = append(cols, fmt.Sprintf("%.0f", p.OpsPerSec))
		}
		for _, p := range r.Phases[1:] {
			x, _ := findRatio(rep.Ratios, s.Name, r.Workers, r.Impl, p.Name, r.Impl, r.Phases[0].Name)
			cols = append(cols, fmtRatio(x))
		}
		cols = append(cols, fmt.Sprint(r.LateOps))
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Impl == oursName {
			continue
		}
		var parts []string
		for _, p := range r.Phases {
			if x, ok := findRatio(rep.Ratios, s.Name, r.Workers, oursName, p.Name, r.Impl, p.Name); ok {
				parts = append(parts, p.Name+" "+fmtRatio(x))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "%dw redlock ÷ %s: %s\n", r.Workers, r.Impl, strings.Join(parts, ", "))
		}
	}
	return nil
}

// renderHandoff writes the hand-off table of the shared-resource
// scenarios' results, and the commands the masters executed per Lock.
func renderHandoff(w io.Writer, rep *Report) error {
	var hand []Result
	for _, r := range rep.Results {
		if r.HandoffMs != nil {
			hand = append(hand, r)
		}
	}
	if len(hand) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nhandoff: from a holder calling Unlock to the next holder's Lock returning (ms)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworkers\timpl\tcount\tp50\tp90\tp99\tmax\tPING RTT\tp50 ÷ RTT\tRTT loaded\tp50 ÷ loaded\t")
	for _, r := range hand {
		h := r.HandoffMs
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Workers, r.Impl, h.Count, fmtMs(h.P50), fmtMs(h.P90), fmtMs(h.P99), fmtMs(h.Max),
			fmtOptRTT(r.PingRTTMs), fmtHandoffRTT(r), fmtOptRTT(r.PingRTTLoadedMs), fmtRatioOf(handoffOver(r, r.PingRTTLoadedMs)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if lines := commandLines(hand); len(lines) > 0 {
		fmt.Fprintln(w, "\ncommands the masters executed per successful Lock (INFO commandstats over the cell, summed over masters; commands run by scripts count too)")
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
	return nil
}

// fmtOpt prints an optional number, "-" when absent.
func fmtOpt(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmtNum(*v)
}

// fmtRTT prints a round trip in milliseconds: three decimals under 1 ms
// (a loopback PING is tens of microseconds).
func fmtRTT(v float64) string {
	if v > 0 && v < 1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmtMs(v)
}

func fmtOptRTT(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmtRTT(*v) + " ms"
}

// handoffRTT is a cell's handoff p50 ÷ its masters' PING round trip; nil
// without handoffs or without a round trip.
func handoffRTT(r Result) *float64 { return handoffOver(r, r.PingRTTMs) }

// handoffOver is a cell's handoff p50 ÷ rtt; nil without handoffs or rtt.
func handoffOver(r Result, rtt *float64) *float64 {
	if r.HandoffMs == nil || r.HandoffMs.Count == 0 || rtt == nil {
		return nil
	}
	return ratio(r.HandoffMs.P50, *rtt)
}

func fmtHandoffRTT(r Result) string { return fmtRatioOf(handoffRTT(r)) }

func fmtRatioOf(x *float64) string {
	if x == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", *x)
}

// sharedLines returns, per shared-resource scenario and worker count,
// handoff p50 ÷ PING RTT and commands per acquisition for every
// implementation, and ours ÷ summaryAgainst Lock p99, e.g.
//
//	contended 16w: handoff p50 ÷ PING RTT: redlock 2.63× (1.00 ÷ 0.380 ms), redsync-failfast 9.10× (3.46 ÷ 0.380 ms)
//	contended 16w: commands/acquisition: redlock 12.0, redsync-failfast 5.00; Lock p99 redlock ÷ redsync-failfast 0.40×
//	contended 16w: fairness across workers (fewest ÷ most acquisitions), share retaken by its releaser: redlock 0.85, 2%; redsync-failfast 0.10, 91%
func sharedLines(rep *Report) []string {
	var out []string
	for _, s := range rep.Scenarios {
		for _, w := range rep.Config.Workers {
			var rows []Result
			for _, r := range rep.Results {
				if r.Scenario == s.Name && r.Workers == w && r.HandoffMs != nil {
					rows = append(rows, r)
				}
			}
			if len(rows) == 0 {
				continue
			}
			var hand, cmds, fair []string
			for _, r := range rows {
				if r.WorkerFairness != nil && r.RetakenShare != nil {
					fair = append(fair, fmt.Sprintf("%s %.2f, %.0f%%", r.Impl, *r.WorkerFairness, 100**r.RetakenShare))
				}
				h := r.Impl + " n/a"
				if x := handoffRTT(r); x != nil {
					h = fmt.Sprintf("%s %.2f× (%s ÷ %s ms)", r.Impl, *x, fmtRTT(r.HandoffMs.P50), fmtRTT(*r.PingRTTMs))
					if y := handoffOver(r, r.PingRTTLoadedMs); y != nil {
						h += fmt.Sprintf(", %.2f× the loaded RTT (%s ms)", *y, fmtRTT(*r.PingRTTLoadedMs))
					}
				}
				hand = append(hand, h)
				c := "n/a"
				if r.CommandsPerAcquisition != nil {
					c = fmtNum(*r.CommandsPerAcquisition)
				}
				cmds = append(cmds, r.Impl+" "+c)
			}
			line := fmt.Sprintf("%s %dw: commands/acquisition: %s", s.Name, w, strings.Join(cmds, ", "))
			ours, ok1 := findResult(rows, s.Name, w, oursName)
			them, ok2 := findResult(rows, s.Name, w, summaryAgainst)
			if ok1 && ok2 && ours.AcquireMs.Count > 0 && them.AcquireMs.Count > 0 {
				if x := ratio(ours.AcquireMs.P99, them.AcquireMs.P99); x != nil {
					line += fmt.Sprintf("; Lock p99 %s ÷ %s %.2f×", oursName, summaryAgainst, *x)
				}
			}
			out = append(out, fmt.Sprintf("%s %dw: handoff p50 ÷ PING RTT: %s", s.Name, w, strings.Join(hand, ", ")), line)
			if len(fair) > 0 {
				out = append(out, fmt.Sprintf("%s %dw: fairness across workers (fewest ÷ most acquisitions), share retaken by its releaser: %s",
					s.Name, w, strings.Join(fair, "; ")))
			}
		}
	}
	return out
}

// commandLines returns, for each cell whose commands were counted, its
// commands per acquisition broken down by command name, largest first:
//
//	contended 16w redlock: 12.0 = set 6.00 + evalsha 2.00 + get 2.00 + del 2.00 (24000 commands, 2000 acquisitions)
func commandLines(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Commands == nil {
			continue
		}
		head := fmt.Sprintf("%s %dw %s: ", r.Scenario, r.Workers, r.Impl)
		if r.CommandsPerAcquisition == nil {
			out = append(out, fmt.Sprintf("%sno successful Lock (%d commands)", head, *r.Commands))
			continue
		}
		names := slices.SortedFunc(maps.Keys(r.CommandsByName), func(a, b string) int {
			if c := cmp.Compare(r.CommandsByName[b], r.CommandsByName[a]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		n := float64(r.AcquireMs.Count)
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s %s", name, fmtNum(float64(r.CommandsByName[name])/n))
		}
		out = append(out, fmt.Sprintf("%s%s = %s (%d commands, %d acquisitions)", head, fmtNum(*r.CommandsPerAcquisition),
			strings.Join(parts, " + "), *r.Commands, r.AcquireMs.Count))
	}
	return out
}
