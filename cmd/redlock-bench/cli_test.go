package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// cli runs the command as main does, and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = exitCode(run(t.Context(), args, &out, &errb), &errb)
	return code, out.String(), errb.String()
}

// Common Go CLI conventions: -h prints the usage to stdout and exits 0; an
// unknown flag gets a short error and a hint on stderr (not the usage) and
// exit 2; -version prints the build's version; the usage spells every flag
// with one dash.
func TestCLIConventions(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		code, out, errOut := cli(t, h)
		if code != 0 || !strings.HasPrefix(out, "redlock-bench measures") || errOut != "" {
			t.Errorf("%s: exit %d, stdout %.80q, stderr %q", h, code, out, errOut)
		}
	}
	code, out, errOut := cli(t, "-nope")
	if code != 2 || out != "" || !strings.Contains(errOut, "-nope") || !strings.Contains(errOut, "redlock-bench -h") || len(errOut) > 200 {
		t.Errorf("unknown flag: exit %d, stdout %q, stderr (%d bytes) %q", code, out, len(errOut), errOut)
	}
	code, out, errOut = cli(t, "-workers", "0")
	if code != 2 || out != "" || len(errOut) > 300 {
		t.Errorf("bad value: exit %d, stdout %q, stderr (%d bytes) %q", code, out, len(errOut), errOut)
	}
	code, out, errOut = cli(t, "-version")
	if code != 0 || !strings.HasPrefix(out, "redlock-bench ") || !strings.Contains(out, runtime.Version()) || errOut != "" {
		t.Errorf("-version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, usage, _ := cli(t, "-h")
	if m := regexp.MustCompile(`(^|\s)--[a-z]`).FindString(usage); m != "" {
		t.Errorf("the usage spells a flag with two dashes (%q)", m)
	}
}

// -cpuprofile writes a profile pprof can read (it starts with gzip's magic
// bytes), and a path that cannot be created is an error, not a panic.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if code, _, errOut := cli(t, "-embedded", "-scenarios", "uncontended", "-impls", "redlock", "-workers", "1",
		"-duration", "100ms", "-q", "-cpuprofile", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s is not a gzipped profile (%d bytes)", path, len(b))
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	if code, _, errOut := cli(t, "-embedded", "-scenarios", "uncontended", "-impls", "redlock", "-workers", "1",
		"-duration", "100ms", "-q", "-cpuprofile", bad); code != 1 || !strings.Contains(errOut, "-cpuprofile") {
		t.Fatalf("unwritable path: exit %d, stderr %q", code, errOut)
	}
}

// docs/bench.md's section "Flags and scenarios" is the default build's -h
// output, byte for byte: a flag or scenario changed here changes there.
func TestHelpInDocs(t *testing.T) {
	if peersBuilt || etcdBuilt {
		t.Skip("the peers and etcd tags add implementations to -h; the docs show the default build's")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, sec, ok := strings.Cut(doc, "\n## Flags and scenarios\n")
	if !ok {
		t.Fatal(`docs/bench.md: no section "## Flags and scenarios"`)
	}
	_, block, ok := strings.Cut(sec, "\n```text\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal(`docs/bench.md: "Flags and scenarios" has no text block`)
	}
	code, out, _ := cli(t, "-h")
	if code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	if block != out {
		dl, ol := strings.Split(block, "\n"), strings.Split(out, "\n")
		for i := range max(len(dl), len(ol)) {
			var d, o string
			if i < len(dl) {
				d = dl[i]
			}
			if i < len(ol) {
				o = ol[i]
			}
			if d != o {
				t.Fatalf("docs/bench.md's -h differs from the binary's at its line %d:\ndocs:   %q\nbinary: %q\n(paste the output of go run ./cmd/redlock-bench -h)", i+1, d, o)
			}
		}
	}
}
