package chaos

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	soakDir      = flag.String("chaos.soak", "", "summarise the runs recorded in this `DIR` (make chaos-soak) and check them against -chaos.soak.min-*")
	soakSections = flag.Int("chaos.soak.min-sections", 1000000, "with -chaos.soak: critical sections inside the assumptions wanted, over all runs")
	soakSeeds    = flag.Int("chaos.soak.min-seeds", 10, "with -chaos.soak: distinct seeds wanted")
)

// TestSoakSummary reads every run make chaos-soak recorded, prints one row
// per run (with the test process's heap and goroutines at the start and
// end of its long run) and the totals, and fails unless the runs inside the
// assumptions add up to the target over both backends with 0 violations
// and 0 stale writes accepted.
func TestSoakSummary(t *testing.T) {
	if *soakDir == "" {
		t.Skip("no -chaos.soak DIR (make chaos-soak)")
	}
	files, err := filepath.Glob(filepath.Join(*soakDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no run JSON in %s (%v)", *soakDir, err)
	}
	slices.Sort(files)
	var (
		sections, violations, staleAccepted int
		wall                                time.Duration
		seeds                               = map[uint64]bool{}
		backends                            = map[string]int{}
		scenarios                           = map[string]int{}
	)
	// The handed scenario beside the fenced one, per run: wall per
	// section and p99 acquire, handed ÷ fenced (docs/fault-lab.md).
	type pair struct{ fenced, handed *Result }
	pairs := map[string]*pair{}
	var runs []string
	fmt.Println("| run | scenario | backend | seed | critical sections | violations | stale writes accepted | faults | wall | availability % | failed Lock calls | of them while a majority answered | p99 acquire | heap start → end (MiB) | goroutines start → end |")
	fmt.Println("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, f := range files {
		s, err := ReadSummary(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Results {
			if !r.Inside {
				continue
			}
			be := r.Backend
			if be == "" {
				be = "process"
			}
			sections += r.Sections
			violations += r.Overlaps
			staleAccepted += r.StaleAccepted
			wall += r.Wall
			seeds[r.Seed] = true
			backends[be] += r.Sections
			sc, _, _ := strings.Cut(r.Scenario, ":") // "inside" (fenced) or "handoff"
			scenarios[sc] += r.Sections
			failed := r.Acquires - r.AcquireOK
			withMajority := failed - r.FailedWithoutMajority
			fmt.Printf("| %s | %s | %s | %d | %d | %d | %d | %d | %v | %.3f | %d | %d | %v | %.1f → %.1f | %d → %d |\n",
				filepath.Base(f), sc, be, r.Seed, r.Sections, r.Overlaps, r.StaleAccepted, r.FaultsRun, r.Wall.Round(time.Second),
				r.Availability, failed, withMajority, r.P99Acquire.Round(time.Millisecond),
				float64(r.HeapStart)/(1<<20), float64(r.HeapEnd)/(1<<20), r.GoroutineStart, r.GoroutineEnd)
			if r.Overlaps != 0 || r.StaleAccepted != 0 {
				t.Errorf("%s: %d violations, %d stale writes accepted inside the assumptions; want 0 and 0", f, r.Overlaps, r.StaleAccepted)
			}
			if withMajority > 0 {
				t.Errorf("%s, %s: %d failed Lock calls waited while a majority of masters answered the prober throughout; want 0", f, sc, withMajority)
			}
			key := filepath.Base(f)
			if pairs[key] == nil {
				pairs[key] = &pair{}
				runs = append(runs, key)
			}
			if sc == "handoff" {
				pairs[key].handed = &r
			} else {
				pairs[key].fenced = &r
			}
		}
	}
	fmt.Println()
	fmt.Println("| run | wall per section, handed ÷ fenced | p99 acquire, handed ÷ fenced | availability %, handed / fenced |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, key := range runs {
		p := pairs[key]
		if p.fenced == nil || p.handed == nil || p.fenced.Sections == 0 || p.handed.Sections == 0 || p.fenced.P99Acquire == 0 {
			continue
		}
		perSection := func(r *Result) float64 { return r.Wall.Seconds() / float64(r.Sections) }
		fmt.Printf("| %s | %.2f | %.2f | %.3f / %.3f |\n", key, perSection(p.handed)/perSection(p.fenced),
			float64(p.handed.P99Acquire)/float64(p.fenced.P99Acquire), p.handed.Availability, p.fenced.Availability)
	}
	fmt.Println()
	fmt.Printf("total: %d critical sections inside the assumptions (process %d, docker %d; fenced %d, handed %d), %d seeds, %d violations, %d stale writes accepted, %v of runs\n",
		sections, backends["process"], backends["docker"], scenarios["inside"], scenarios["handoff"], len(seeds), violations, staleAccepted, wall.Round(time.Second))
	if sections < *soakSections {
		t.Errorf("%d critical sections inside the assumptions, want ≥ %d", sections, *soakSections)
	}
	if len(seeds) < *soakSeeds {
		t.Errorf("%d seeds, want ≥ %d", len(seeds), *soakSeeds)
	}
	if backends["process"] == 0 || backends["docker"] == 0 {
		t.Errorf("sections by backend %v: want both process and docker", backends)
	}
}
