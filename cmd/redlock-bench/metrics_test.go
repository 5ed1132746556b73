//go:build otel

package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// -metrics-addr serves the redlock-otel cells' metrics in Prometheus format
// while the bench runs: a scrape in the middle of a run finds the
// acquisition histogram and one series per master.
func TestMetricsEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"-embedded", "-scenarios", "telemetry", "-workers", "2", "-duration", "3s", "-q", "-metrics-addr", addr}
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() { done <- run(t.Context(), args, &stdout, &stderr) }()
	var body string
	deadline := time.Now().Add(20 * time.Second)
	// Every metric the dashboard (observability/redlock-dashboard.json)
	// names, but the stale fenced writes, which WriteFenced counts (no
	// Locker, and the bench writes nothing fenced; TestGlobalProviders in
	// tests/telemetry covers it).
	var want []string
	for _, n := range dashboardMetrics(t) {
		if n != "redlock_fenced_writes_stale_total" {
			want = append(want, n)
		}
	}
	missing := func() []string {
		var out []string
		for _, n := range want {
			if !strings.Contains(body, "\n"+n+"{") && !strings.Contains(body, "\n"+n+" ") {
				out = append(out, n)
			}
		}
		return out
	}
	// Until an acquisition succeeded: on a loaded machine the first rounds
	// can fail (cold connections against a 50ms MasterTimeout).
	for !strings.Contains(body, `redlock_master_calls_total{`) || !strings.Contains(body, "redlock_acquire_duration_seconds_bucket{") ||
		!strings.Contains(body, `redlock_outcome="acquired"`) || len(missing()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("scraped from %s: the dashboard's metrics %v are missing; last body:\n%.3000s", addr, missing(), body)
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	masters := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "redlock_master_calls_total{") {
			if _, rest, ok := strings.Cut(line, `server_address="`); ok {
				a, _, _ := strings.Cut(rest, `"`)
				masters[a] = true
			}
		}
	}
	if len(masters) != 5 {
		t.Errorf("redlock_master_calls_total has series for %d masters, want 5: %v", len(masters), masters)
	}
	if !strings.Contains(body, `redlock_acquire_duration_seconds_bucket{`) || !strings.Contains(body, `redlock_outcome="acquired"`) {
		t.Errorf("no acquired outcome in the acquisition histogram")
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "redlock-otel") {
		t.Fatalf("the telemetry scenario's table lacks redlock-otel:\n%s", stdout.String())
	}
}
