//go:build sqlfence

package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/sqlfence/pgtest"
)

// TestSmokeSQLFence runs the sqlfence scenario briefly on a throwaway
// PostgreSQL: every variant in both modes gives a row, with no errors.
func TestSmokeSQLFence(t *testing.T) {
	if _, err := pgtest.BinDir(); errors.Is(err, pgtest.ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	args := []string{"-scenarios", "sqlfence", "-duration", "300ms", "-workers", "2", "-q"}
	if _, err := exec.LookPath("redis-server"); err != nil {
		args = append(args, "-embedded")
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run %q: %v\nstderr:\n%s", args, err, stderr.String())
	}
	out := stdout.String()
	for _, mode := range []string{"contended", "uncontended"} {
		for _, v := range sqlfenceVariants {
			found := false
			for line := range strings.SplitSeq(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 7 && f[0] == mode && f[2] == v.name {
					found = true
					// No count of operations is asserted: on a loaded
					// machine a 300 ms window may end before the first.
					if f[6] != "0" {
						t.Errorf("%s %s: %s errors", mode, v.name, f[6])
					}
				}
			}
			if !found {
				t.Errorf("no row for %s %s in:\n%s", mode, v.name, out)
			}
		}
	}
}
