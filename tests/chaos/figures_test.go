package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The docs quote the fault lab's runs; these tests hold them to the JSON
// the runs wrote (tests/chaos/*.json), so a new run cannot leave an old
// figure behind. They read files only: no masters.

// loadSummaries reads every run recorded in this directory, results.json
// first.
func loadSummaries(t *testing.T) (main Summary, all []Summary) {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no run JSON in tests/chaos (%v)", err)
	}
	for _, f := range files {
		s, err := ReadSummary(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "results.json" {
			main = s
		}
		all = append(all, s)
	}
	if main.Seed == 0 || len(main.Results) == 0 {
		t.Fatal("tests/chaos/results.json: no seed or no results")
	}
	return main, all
}

// docs/fault-lab.md's long-run table is exactly what Table renders from
// results.json, under a paragraph that names its seed and wall time.
func TestLongRunFiguresMatchResults(t *testing.T) {
	main, _ := loadSummaries(t)
	readme, err := os.ReadFile("../../docs/fault-lab.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i := strings.Index(text, "\nLong run, `make chaos`")
	if i < 0 {
		t.Fatal("docs/fault-lab.md: no paragraph starting \"Long run, `make chaos`\"")
	}
	var want bytes.Buffer
	Table(&want, main.Results)
	head, _, _ := strings.Cut(want.String(), "\n")
	j := strings.Index(text[i:], head)
	if j < 0 {
		t.Fatal("docs/fault-lab.md: no fault-lab table after the long-run paragraph")
	}
	para := strings.Join(strings.Fields(text[i:i+j]), " ")
	if !strings.Contains(para, fmt.Sprintf("seed %d", main.Seed)) {
		t.Errorf("docs/fault-lab.md's long-run paragraph does not give results.json's seed %d: %q", main.Seed, para)
	}
	if wall := strings.ReplaceAll(para, " ", ""); !strings.Contains(wall, main.Wall) {
		t.Errorf("docs/fault-lab.md's long-run paragraph does not give results.json's wall time %s: %q", main.Wall, para)
	}
	var got []string
	for _, l := range strings.SplitAfter(text[i+j:], "\n") {
		if !strings.HasPrefix(l, "|") {
			break
		}
		got = append(got, l)
	}
	if g := strings.Join(got, ""); g != want.String() {
		t.Errorf("docs/fault-lab.md's long-run table disagrees with tests/chaos/results.json\ndocs/fault-lab.md:\n%s\nresults.json renders:\n%s", g, want.String())
	}
}

// Figures about the fault lab in README.md and docs/*.md prose (most in
// docs/fault-lab.md, a summary in the README) each match a row of a
// recorded run.
func TestDocFiguresMatchResults(t *testing.T) {
	_, all := loadSummaries(t)
	var rows []Result
	for _, s := range all {
		rows = append(rows, s.Results...)
	}
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range figureClaims(string(b)) {
			checked++
			if !slices.ContainsFunc(rows, c.holds) {
				t.Errorf("%s: %q matches no row of tests/chaos/*.json", filepath.Base(f), c.text)
			}
		}
	}
	if checked == 0 {
		t.Error("no fault-lab figure found in README.md or docs/: the patterns no longer match the prose")
	}
}

// A claim is one figure sentence and the test a row must pass to back it.
type claim struct {
	text  string
	holds func(Result) bool
}

// num matches a count written with spaces between thousands (100 005).
const num = `(\d{1,3}(?: \d{3})*)`

var (
	// "0 violations in 100 005 critical sections", "8 overlaps and 12
	// fence regressions in 2 373 sections", "649 overlapping sections in 2 050".
	reOverlaps = regexp.MustCompile(num + ` (?:violations|overlaps|overlapping (?:critical )?sections)(?: and ` + num + ` fence regressions)? in ` + num + `\b`)
	// "14 of 24 rejections", "12 of the 28 rejections".
	reRejected = regexp.MustCompile(num + ` of (?:the )?` + num + ` rejections`)
	// "36 stale writes attempted".
	reAttempted = regexp.MustCompile(num + ` stale writes attempted`)
)

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.ReplaceAll(s, " ", ""))
	return n
}

func figureClaims(doc string) []claim {
	text := strings.Join(strings.Fields(doc), " ")
	var cs []claim
	for _, m := range reOverlaps.FindAllStringSubmatch(text, -1) {
		over, sections := atoi(m[1]), atoi(m[3])
		regress := -1
		if m[2] != "" {
			regress = atoi(m[2])
		}
		cs = append(cs, claim{m[0], func(r Result) bool {
			return r.Overlaps == over && r.Sections == sections && (regress < 0 || r.FenceRegressions == regress)
		}})
	}
	for _, m := range reRejected.FindAllStringSubmatch(text, -1) {
		excl, att := atoi(m[1]), atoi(m[2])
		cs = append(cs, claim{m[0], func(r Result) bool { return r.RejectedExclusive == excl && r.StaleAttempted == att }})
	}
	for _, m := range reAttempted.FindAllStringSubmatch(text, -1) {
		att := atoi(m[1])
		cs = append(cs, claim{m[0], func(r Result) bool { return r.StaleAttempted == att }})
	}
	return cs
}

// The claim patterns themselves: each must catch a stale figure.
func TestFigureClaims(t *testing.T) {
	var row Result
	row.Sections, row.StaleAttempted, row.RejectedExclusive = 100005, 24, 14
	for _, tt := range []struct {
		doc   string
		holds bool
	}{
		{"inside: 0 violations in 100 005 critical sections.", true},
		{"inside: 0 violations in 20 004 critical sections.", false},
		{"0 overlapping critical sections in\n100 005; then", true},
		{"0 overlaps and 1 fence regressions in 100 005 sections", false},
		{"(14 of 24 rejections in the long row)", true},
		{"12 of the 28 rejections", false},
		{"24 stale writes attempted", true},
		{"36 stale writes attempted", false},
	} {
		cs := figureClaims(tt.doc)
		if len(cs) != 1 {
			t.Errorf("%q: %d claims found, want 1", tt.doc, len(cs))
			continue
		}
		if got := cs[0].holds(row); got != tt.holds {
			t.Errorf("%q against %+v: holds %v, want %v", tt.doc, row, got, tt.holds)
		}
	}
}
