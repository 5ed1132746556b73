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
	fmt.Println("| run | scenario | backend | seed | critical sections | violations | stale writes accepted | faults | wall | heap start → end (MiB) | goroutines start → end |")
	fmt.Println("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
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
			fmt.Printf("| %s | %s | %s | %d | %d | %d | %d | %d | %v | %.1f → %.1f | %d → %d |\n",
				filepath.Base(f), sc, be, r.Seed, r.Sections, r.Overlaps, r.StaleAccepted, r.FaultsRun, r.Wall.Round(time.Second),
				float64(r.HeapStart)/(1<<20), float64(r.HeapEnd)/(1<<20), r.GoroutineStart, r.GoroutineEnd)
			if r.Overlaps != 0 || r.StaleAccepted != 0 {
				t.Errorf("%s: %d violations, %d stale writes accepted inside the assumptions; want 0 and 0", f, r.Overlaps, r.StaleAccepted)
			}
		}
	}
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
