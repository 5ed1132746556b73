package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardExprs returns every query of observability/redlock-dashboard.json,
// by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../observability/redlock-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("the dashboard has no title or no panels")
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			out[p.Title] = append(out[p.Title], q.Expr)
		}
	}
	return out
}

// dashboardMetrics returns the metric names the dashboard's queries name.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\bredlock_[a-z_]+`)
	// Label names stand in grouping clauses and matchers: drop those.
	labels := regexp.MustCompile(`\b(by|without) \([^)]*\)|\{[^}]*\}`)
	var names []string
	for _, exprs := range dashboardExprs(t) {
		for _, e := range exprs {
			for _, n := range re.FindAllString(labels.ReplaceAllString(e, ""), -1) {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// Every query of the dashboard passes promtool: each is checked as a
// throwaway recording rule (Grafana's $__rate_interval as 5m, the $job and
// $instance variables as "All").
func TestDashboardQueriesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (scripts/check-rules.sh installs it: apt-get install prometheus)")
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for title, exprs := range dashboardExprs(t) {
		for _, e := range exprs {
			e = strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*").Replace(e)
			q, _ := json.Marshal(e) // a JSON string is a YAML string
			rules.WriteString("      # " + title + "\n      - record: dashboard:query:" + string(rune('a'+n%26)) + "\n        expr: " + string(q) + "\n")
			n++
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s\n%s", n, err, out, rules.String())
	}
}

// Several services often share one Prometheus: the dashboard has job and
// instance variables, and every metric selector of every query filters by
// both, so that one service's panels never merge another's series.
func TestDashboardFiltersByJobAndInstance(t *testing.T) {
	b, err := os.ReadFile("../../observability/redlock-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		q, _ := json.Marshal(v.Query)
		vars[v.Name] = v.Type + " " + string(q)
	}
	for _, name := range []string{"job", "instance"} {
		if v, ok := vars[name]; !ok || !strings.HasPrefix(v, "query ") || !strings.Contains(v, "label_values(") {
			t.Errorf("template variable %q = %q, want a query variable over label_values(...)", name, v)
		}
	}
	// A metric selector: a redlock_ metric name and its matchers, once
	// grouping clauses (which name labels) are taken out; the label names
	// in a matcher go with their selector.
	groups := regexp.MustCompile(`\b(by|without|on|ignoring) \([^)]*\)`)
	sel := regexp.MustCompile(`\bredlock_[a-z_]+(\{[^}]*\})?`)
	for title, exprs := range dashboardExprs(t) {
		for _, e := range exprs {
			sels := sel.FindAllString(groups.ReplaceAllString(e, ""), -1)
			if len(sels) == 0 {
				t.Errorf("panel %q: no metric selector in %s", title, e)
			}
			for _, s := range sels {
				if !strings.Contains(s, `job=~"$job"`) || !strings.Contains(s, `instance=~"$instance"`) {
					t.Errorf("panel %q: selector %s does not filter by $job and $instance", title, s)
				}
			}
		}
	}
}
