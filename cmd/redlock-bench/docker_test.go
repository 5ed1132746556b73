//go:build docker

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/labdocker"
)

// TestSmokeDocker runs the stall and partition scenarios on five
// containers the bench starts itself: the header names the masters and
// both fault methods, stall freezes masters (redsync completes nothing
// with two paused) and ours goes on with two cut off the network.
func TestSmokeDocker(t *testing.T) {
	if err := labdocker.Available(t.Context()); err != nil {
		t.Skipf("skipping: needs Docker: %v", err)
	}
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-docker", "-scenarios", "stall,partition", "-impls", "redlock,redsync", "-duration", "2s", "-workers", "2", "-q", "-json", jsonPath}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.Masters.Kind != "lab-docker" || rep.Masters.N != 5 {
		t.Errorf("masters = %s × %d, want lab-docker × 5", rep.Masters.Kind, rep.Masters.N)
	}
	for _, want := range []string{"docker pause", "partition: docker network disconnect"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("header lacks %q:\n%s", want, stdout.String())
		}
	}
	phaseOps := func(sc, im, name string) int64 {
		for _, r := range rep.Results {
			if r.Scenario != sc || r.Impl != im {
				continue
			}
			for _, p := range r.Phases {
				if p.Name == name {
					return p.Ops
				}
			}
		}
		t.Fatalf("no phase %s/%s/%q", sc, im, name)
		return 0
	}
	if n := phaseOps("stall", "redsync", "2 stopped"); n != 0 {
		t.Errorf("redsync completed %d ops with two containers paused; the pause did not take effect", n)
	}
	if n := phaseOps("stall", "redlock", "2 stopped"); n == 0 {
		t.Error("ours completed nothing with two of five containers paused")
	}
	if n := phaseOps("partition", "redlock", "2 cut"); n == 0 {
		t.Error("ours completed nothing with two of five containers cut")
	}
}
