package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/labdocker"
)

// started records the id (the redlock-lab.cluster label) of every cluster
// this test binary started, so that TestMain checks only its own: under
// `go test ./...` other packages' test binaries run Docker clusters at the
// same time, and counting theirs would fail this one at random. It is the
// one piece of package-level state here because TestMain has no other way
// to hear from the tests.
var started struct {
	mu  sync.Mutex
	ids []string
}

// TestMain fails the run when a goroutine outlives the tests, or when a
// container or network of a cluster these tests started is still there
// after them (each test's Cleanup closes its cluster; this is the check that
// it did, through the docker CLI rather than lab).
func TestMain(m *testing.M) {
	code := m.Run()
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: goroutines left after the tests: %v\n", err)
		code = 1
	}
	started.mu.Lock()
	ids := slices.Clone(started.ids)
	started.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left := 0
	for _, id := range ids {
		if out, err := leftovers(ctx, id); err != nil || out != "" {
			fmt.Fprintf(os.Stderr, "FAIL: cluster %s left behind:\n%s (err %v)\n", id, out, err)
			left++
			code = 1
		}
	}
	fmt.Fprintf(os.Stderr, "TestMain: %d Docker clusters started, %d left behind\n", len(ids), left)
	os.Exit(code)
}

// docker runs the docker command line and returns its trimmed output.
func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// leftovers lists the containers and networks labelled with cluster id, ""
// when there are none: what `docker ps -a --filter label=redlock-lab.cluster`
// would show of it.
func leftovers(ctx context.Context, id string) (string, error) {
	label := "label=redlock-lab.cluster=" + id
	ctrs, err := docker(ctx, "ps", "-a", "--filter", label, "--format", "container {{.Names}} {{.Status}}")
	if err != nil {
		return "", err
	}
	nets, err := docker(ctx, "network", "ls", "--filter", label, "--format", "network {{.Name}}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(ctrs + "\n" + nets), nil
}

// dockerCluster starts five masters on the Docker backend, or skips the test
// saying what is missing: an engine, the image (REDLOCK_REDIS_IMAGE), or the
// docker CLI that the leftover checks use. It records the cluster's id for
// TestMain and checks in a cleanup, after lab has closed the cluster, that
// none of its containers or networks remain.
func dockerCluster(t *testing.T) *lab.Masters {
	t.Helper()
	if err := labdocker.Available(t.Context()); err != nil {
		t.Skipf("skipping: these tests need Docker masters: %v", err)
	}
	// The leftover checks go through the CLI (not through labdocker's
	// client), which must reach the engine too.
	if _, err := docker(t.Context(), "version", "--format", "{{.Server.Version}}"); err != nil {
		t.Skipf("skipping: the docker CLI, which checks for leftover containers, cannot reach an engine: %v", err)
	}
	var id string
	// Registered before ForTest, so it runs after ForTest's Close.
	t.Cleanup(func() {
		if id == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if left, err := leftovers(ctx, id); err != nil || left != "" {
			t.Errorf("cluster %s after Close: %q (err %v), want nothing", id, left, err)
		}
	})
	start := time.Now()
	c := labdocker.ForTest(t, 5, nil)
	id = clusterID(t, c.Addrs()[0])
	started.mu.Lock()
	started.ids = append(started.ids, id)
	started.mu.Unlock()
	t.Logf("5 Docker masters up in %v (cluster %s)", time.Since(start).Round(time.Millisecond), id)
	return c
}

// clusterID returns the redlock-lab.cluster label of the container that
// publishes addr (127.0.0.1:port).
func clusterID(t *testing.T, addr string) string {
	t.Helper()
	out, err := docker(t.Context(), "ps", "--filter", "label=redlock-lab.cluster",
		"--format", `{{.Label "redlock-lab.cluster"}} {{.Ports}}`)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		id, ports, _ := strings.Cut(line, " ")
		if strings.Contains(ports, addr+"->6379/tcp") {
			return id
		}
	}
	t.Fatalf("no container publishes %s; docker ps:\n%s", addr, out)
	return ""
}

// errAs is errors.As for tests.
func errAs[E error](t *testing.T, err error) E {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not a %T", err, err, e)
	}
	return e
}
