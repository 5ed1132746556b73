//go:build etcd

package main

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmokeEtcd runs a tiny comparison with etcd, as -impls etcd does: the
// bench starts a 3-member cluster, runs etcd's mutex in the uncontended
// and contended cells (TryLock, then Lock) and its election in both
// election scenarios beside ours, checks the JSON against the
// schema, and leaves no member running.
func TestSmokeEtcd(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("skipping: no etcd on PATH (Debian's etcd-server package: apt-get install etcd-server)")
	}
	impls := []string{"redlock", "etcd"}
	path := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-impls", strings.Join(impls, ","), "-scenarios", "uncontended,contended,election-handover,election-failover",
		"-duration", "500ms", "-workers", "2", "-failovers", "1", "-election-ttl", "2s", "-q", "-json", path}
	if _, err := exec.LookPath("redis-server"); err != nil {
		args = append(args, "-embedded")
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.Etcd == nil || rep.Etcd.Members != 3 || len(rep.Etcd.Endpoints) != 3 {
		t.Fatalf("etcd = %+v, want 3 members", rep.Etcd)
	}
	for _, sc := range []string{"uncontended", "contended"} {
		r, ok := findResult(rep.Results, sc, 2, "etcd")
		if !ok || r.Ops == 0 || r.Validity.Source != sourceNone || r.Validity.Count != 0 || r.Commands != nil || r.PingRTTMs != nil {
			t.Errorf("%s/etcd: %+v (found %v)", sc, r, ok)
			continue
		}
		op := map[string]string{"uncontended": "TryLock+Unlock", "contended": "Lock+Unlock"}[sc]
		if !strings.Contains(strings.Join(r.Notes, "\n"), "etcd: "+op) {
			t.Errorf("%s/etcd notes %q lack %q", sc, r.Notes, op)
		}
	}
	checkElections(t, rep, impls, 2*time.Second)
	if !strings.Contains(stdout.String(), "etcd:    3 etcd") {
		t.Errorf("the header does not name the etcd cluster:\n%s", stdout.String())
	}
	// Every member is gone: nothing listens on their client ports.
	for _, ep := range rep.Etcd.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after the run", ep)
		}
	}
}

// Without etcd on PATH, -impls etcd fails before starting anything, naming
// Debian's package.
func TestEtcdMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-impls", "etcd", "-scenarios", "uncontended", "-q"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "apt-get install etcd-server") {
		t.Fatalf("run without etcd on PATH: %v, want an error naming etcd-server", err)
	}
}
