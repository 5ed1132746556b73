package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Table writes results as a Markdown table, the format the README keeps.
func Table(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| scenario | faults | inside assumptions | critical sections | violations (mutex) | fence regressions | stale writes attempted / accepted | of the rejected: by the only holder | availability % | p99 acquire |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		inside, avail, p99 := r.summaryCells()
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %d / %d | %d | %s | %s |\n",
			r.Scenario, r.Faults, inside, r.Sections, r.Overlaps, r.FenceRegressions,
			r.StaleAttempted, r.StaleAccepted, r.RejectedExclusive, avail, p99)
	}
}

// Summary is the JSON document -chaos.json writes.
type Summary struct {
	Seed    uint64   `json:"seed"`
	Long    bool     `json:"long"`
	Backend string   `json:"backend,omitempty"` // "" = process
	Command string   `json:"command"`
	Started string   `json:"started"`
	Wall    string   `json:"wall"`
	Machine string   `json:"machine,omitempty"`
	Results []Result `json:"results"`
}

// WriteJSON writes s to path.
func WriteJSON(path string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadSummary reads a JSON document WriteJSON wrote.
func ReadSummary(path string) (Summary, error) {
	var s Summary
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// String is a one-line account of a result for the test log.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d sections, %d violations (mutex model %s", r.Scenario, r.Sections, r.Overlaps, r.MutexOK)
	if r.FencedOK != "" {
		fmt.Fprintf(&b, ", fenced model %s", r.FencedOK)
	}
	fmt.Fprintf(&b, "), %d fence regressions, %d fence reuses, %d late exits, writes %d: %d stale rejected (%d of them by the only holder), %d stale accepted, %d errors (resource model %s), faults %d, availability %.1f%%, p99 acquire %v, wall %v",
		r.FenceRegressions, r.FenceReuse, r.Late, r.Writes, r.StaleAttempted, r.RejectedExclusive, r.StaleAccepted, r.WriteErrors, r.ResourceOK, r.FaultsRun, r.Availability, r.P99Acquire, r.Wall.Round(time.Millisecond))
	if r.MinorityExceeded > 0 || r.FailedWithoutMajority > 0 {
		fmt.Fprintf(&b, "; fewer than a majority of masters answered the prober for %v in all, through which %d of the failed Lock calls waited", r.MinorityExceeded, r.FailedWithoutMajority)
	}
	if r.Example != "" {
		b.WriteString("; first overlap: " + r.Example)
	}
	if r.Notes != "" {
		b.WriteString("; " + r.Notes)
	}
	return b.String()
}

// summaryCells are the cells both result tables end with: whether the run
// was inside the assumptions, its availability and its p99 acquisition
// ("–" when nothing was acquired).
func (r Result) summaryCells() (inside, avail, p99 string) {
	inside, avail, p99 = "no", "–", "–"
	if r.Inside {
		inside = "yes"
	}
	if r.Acquires > 0 {
		avail = fmt.Sprintf("%.1f", r.Availability)
		p99 = r.P99Acquire.Round(100 * time.Microsecond).String()
	}
	return inside, avail, p99
}
