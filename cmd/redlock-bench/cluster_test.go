package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterFlag(t *testing.T) {
	for _, ok := range []struct {
		arg      string
		n, s     int
		withMast []string
	}{
		{"3x3", 3, 3, nil}, {"3X1", 3, 1, nil}, {"5×2", 5, 2, nil}, {"3x3", 3, 3, []string{"-masters", "3"}},
	} {
		cfg, err := parseFlags(append([]string{"-cluster", ok.arg}, ok.withMast...), io.Discard)
		if err != nil {
			t.Fatalf("-cluster %s: %v", ok.arg, err)
		}
		if cfg.clusters != ok.n || cfg.shards != ok.s || cfg.masters != ok.n {
			t.Errorf("-cluster %s: clusters %d shards %d masters %d", ok.arg, cfg.clusters, cfg.shards, cfg.masters)
		}
	}
	for _, bad := range []struct {
		want string
		args []string
	}{
		{"is not NxS", []string{"-cluster", "3"}},
		{"whole numbers", []string{"-cluster", "ax3"}},
		{"at least 1", []string{"-cluster", "0x3"}},
		{"at least 1", []string{"-cluster", "3x0"}},
		{"more than 64", []string{"-cluster", "9x9"}},
		{"excludes", []string{"-cluster", "3x3", "-embedded"}},
		{"excludes", []string{"-cluster", "3x3", "-addrs", "a:1"}},
		{"contradicts", []string{"-cluster", "3x3", "-masters", "5"}},
	} {
		_, err := parseFlags(bad.args, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parseFlags(%q) = %v, want a usage error containing %q", bad.args, err, bad.want)
		}
	}
}

// Every implementation runs on cluster masters (ours through the
// per-shard fast path, redsync and single through go-redis
// ClusterClients), and the report says what the masters were.
func TestSmokeCluster(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	if b := os.Getenv("REDLOCK_LAB_BACKEND"); b != "" && b != "process" {
		t.Skip("clusters need the process backend")
	}
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-cluster", "3x2", "-duration", "300ms", "-workers", "2", "-scenarios", "contended", "-q", "-json", jsonPath}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if m := rep.Masters; m.Kind != "lab-cluster" || m.N != 3 || len(m.Addrs) != 3 || strings.Count(m.Addrs[0], ",") != 1 {
		t.Fatalf("masters = %+v, want 3 lab clusters of 2 nodes", m)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Impl] = true
		if r.Ops == 0 {
			t.Errorf("%s/%s completed nothing on cluster masters: %+v", r.Scenario, r.Impl, r)
		}
	}
	for _, im := range implNames() {
		if !seen[im] {
			t.Errorf("no result for %s", im)
		}
	}
}
