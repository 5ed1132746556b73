package labdocker_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/lab/labtest"
	"github.com/quorumlab/redlock/labdocker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The checks both backends share (package labtest).
var (
	probe                 = labtest.Probe
	pingWithin            = labtest.PingWithin
	eventually            = labtest.Eventually
	checkKillRestartEmpty = labtest.CheckKillRestartEmpty
)

// dockerCLI runs the docker command line, skipping the test if it is absent:
// the checks look at the engine through it, not through labdocker.
func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skipf("docker CLI not found: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// clusterID finds the redlock-lab.cluster label of the container publishing
// addr (127.0.0.1:port).
func clusterID(t *testing.T, addr string) string {
	t.Helper()
	out := dockerCLI(t, "ps", "-a", "--filter", "label=redlock-lab.cluster",
		"--format", `{{.Label "redlock-lab.cluster"}} {{.Ports}}`)
	for line := range strings.SplitSeq(out, "\n") {
		id, ports, _ := strings.Cut(line, " ")
		if strings.Contains(ports, addr+"->6379/tcp") {
			return id
		}
	}
	t.Fatalf("no container publishes %s; docker ps:\n%s", addr, out)
	return ""
}

func dbsize(t *testing.T, cl *redis.Client) int64 {
	t.Helper()
	n, err := cl.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}

func TestDockerMasters(t *testing.T) {
	start := time.Now()
	c := labdocker.ForTest(t, 3, nil)
	t.Logf("3 Docker masters up in %v", time.Since(start))
	t.Cleanup(c.ResumeAll)
	ctx := t.Context()

	t.Run("SetGet", func(t *testing.T) {
		for i := range c.N() {
			if err := c.Client(i).Set(ctx, "k", i, 0).Err(); err != nil {
				t.Fatalf("SET on %d: %v", i, err)
			}
		}
		for i := range c.N() {
			got, err := c.Client(i).Get(ctx, "k").Result()
			if err != nil || got != strconv.Itoa(i) {
				t.Errorf("GET k on %d = %q, %v; want %d (masters must be independent)", i, got, err, i)
			}
		}
	})

	t.Run("PauseResume", func(t *testing.T) {
		p := probe(t, c.Addrs()[1])
		if err := pingWithin(p, time.Second); err != nil {
			t.Fatalf("PING before pause: %v", err)
		}
		if err := c.Pause(1); err != nil {
			t.Fatal(err)
		}
		if err := c.Pause(1); err != nil {
			t.Fatalf("second Pause: %v", err)
		}
		// docker-proxy still accepts, so this is a timeout, not a refusal.
		var ne interface{ Timeout() bool }
		if err := pingWithin(p, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("PING to a paused master = %v, want a timeout", err)
		}
		if err := pingWithin(probe(t, c.Addrs()[0]), time.Second); err != nil {
			t.Fatalf("master 0 affected by pausing 1: %v", err)
		}
		if err := c.Resume(1); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error { return pingWithin(p, 200*time.Millisecond) })
		if err := c.Resume(1); err != nil {
			t.Fatalf("Resume of a running master: %v", err)
		}
	})

	t.Run("KillRestart", func(t *testing.T) { checkKillRestartEmpty(t, c, nil) })

	t.Run("CutHeal", func(t *testing.T) {
		if err := c.Client(2).Set(ctx, "kept", "2", 0).Err(); err != nil {
			t.Fatal(err)
		}
		p := probe(t, c.Addrs()[2])
		if err := pingWithin(p, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.Cut(2); err != nil {
			t.Fatal(err)
		}
		if err := c.Cut(2); err != nil {
			t.Fatalf("second Cut: %v", err)
		}
		// A fast failure: the open connection gets EOF and a new one is
		// refused, well inside the 200 ms.
		start := time.Now()
		if err := pingWithin(p, 200*time.Millisecond); err == nil {
			t.Fatal("PING on an open connection to a cut master succeeded")
		}
		// A raw dial: go-redis retries refused dials until the ctx ends.
		if conn, err := net.DialTimeout("tcp", c.Addrs()[2], 200*time.Millisecond); !errors.Is(err, syscall.ECONNREFUSED) {
			if conn != nil {
				_ = conn.Close()
			}
			t.Fatalf("new connection to a cut master: %v, want connection refused", err)
		}
		t.Logf("cut master failed both PINGs in %v", time.Since(start))
		if err := pingWithin(probe(t, c.Addrs()[1]), time.Second); err != nil {
			t.Fatalf("master 1 affected by cutting 2: %v", err)
		}
		if err := c.Heal(2); err != nil {
			t.Fatal(err)
		}
		if err := c.Heal(2); err != nil {
			t.Fatalf("second Heal: %v", err)
		}
		eventually(t, 5*time.Second, func() error { return pingWithin(p, 200*time.Millisecond) })
		// Data survives a cut, and the default client finds its way back.
		eventually(t, 10*time.Second, func() error {
			got, err := c.Client(2).Get(ctx, "kept").Result()
			if err == nil && got != "2" {
				return fmt.Errorf("GET kept = %q after Heal, want 2", got)
			}
			return err
		})
	})

	t.Run("JumpClock", func(t *testing.T) {
		cl := c.Client(1)
		if err := cl.Set(ctx, "long", "v", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Set(ctx, "short", "v", time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		n, err := c.JumpClock(ctx, 1, 4*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("JumpClock affected %d keys, want 2", n)
		}
		if ttl := cl.PTTL(ctx, "long").Val(); ttl <= 0 || ttl > 6*time.Second {
			t.Errorf("PTTL long after 4s jump = %v, want (0, 6s]", ttl)
		}
		if e := cl.Exists(ctx, "short").Val(); e != 0 {
			t.Errorf("key with 1s TTL survived a 4s jump")
		}
	})

	t.Run("Slow", func(t *testing.T) {
		const d = 300 * time.Millisecond
		p := probe(t, c.Addrs()[1])
		if err := pingWithin(p, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.Slow(ctx, 1, d); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := pingWithin(p, 5*time.Second); err != nil {
			t.Fatalf("PING after Slow: %v", err)
		}
		if el := time.Since(start); el < d-100*time.Millisecond || el > d+time.Second {
			t.Errorf("PING during Slow(%v) took %v", d, el)
		}
	})

	t.Run("DebugCommand", func(t *testing.T) {
		// enable-debug-command yes: DEBUG works through the published port.
		if err := c.Client(0).Do(ctx, "DEBUG", "SLEEP", "0").Err(); err != nil {
			t.Fatalf("DEBUG SLEEP 0 through the published port: %v", err)
		}
	})
}

func TestDockerCloseRemovesEverything(t *testing.T) {
	if err := labdocker.Available(t.Context()); err != nil {
		t.Skipf("skipping Docker backend test: %v", err)
	}
	c, err := labdocker.Start(t.Context(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close()
		}
	})
	id := clusterID(t, c.Addrs()[0])
	label := "label=redlock-lab.cluster=" + id
	if got := dockerCLI(t, "ps", "-aq", "--filter", label); len(strings.Fields(got)) != 3 {
		t.Fatalf("containers of cluster %s before Close: %q, want 3", id, got)
	}
	if got := dockerCLI(t, "network", "ls", "-q", "--filter", label); len(strings.Fields(got)) != 1 {
		t.Fatalf("networks of cluster %s before Close: %q, want 1", id, got)
	}
	// A paused, a cut and a killed master must all go.
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Cut(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(2); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	closed = true
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	if got := dockerCLI(t, "ps", "-aq", "--filter", label); got != "" {
		t.Errorf("containers of cluster %s after Close: %q", id, got)
	}
	if got := dockerCLI(t, "network", "ls", "-q", "--filter", label); got != "" {
		t.Errorf("networks of cluster %s after Close: %q", id, got)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Cut(0); err == nil {
		t.Errorf("Cut after Close succeeded")
	}
}

func TestDockerMissingImage(t *testing.T) {
	if err := labdocker.Available(t.Context()); err != nil {
		t.Skipf("skipping Docker backend test: %v", err)
	}
	_, err := labdocker.Start(t.Context(), 1, &lab.Options{Image: "redlock-lab/no-such-image:none"})
	if !errors.Is(err, lab.ErrNoDocker) {
		t.Fatalf("Start with a missing image = %v, want ErrNoDocker", err)
	}
	if !strings.Contains(err.Error(), "make image") || !strings.Contains(err.Error(), "REDLOCK_REDIS_IMAGE") {
		t.Errorf("error %q does not say how to get an image", err)
	}
}

func TestDockerAppendFsyncAlways(t *testing.T) {
	c := labdocker.ForTest(t, 1, &lab.Options{AppendFsyncAlways: true})
	ctx := t.Context()
	got, err := c.Client(0).ConfigGet(ctx, "append*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["appendonly"] != "yes" || got["appendfsync"] != "always" {
		t.Fatalf("CONFIG GET append* = %v, want appendonly yes, appendfsync always", got)
	}
	// Restart is EMPTY even with AOF: a new container, not docker restart.
	if err := c.Client(0).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error { return c.Client(0).Ping(ctx).Err() })
	if n := dbsize(t, c.Client(0)); n != 0 {
		t.Fatalf("DBSIZE after Restart with AOF = %d, want 0", n)
	}
}

func TestDockerCutThroughProxy(t *testing.T) {
	// With Options.Proxy the proxy does the cutting: a blackhole (timeout),
	// and Latency works as on the process backend.
	c := labdocker.ForTest(t, 1, &lab.Options{Proxy: true})
	p := probe(t, c.Addrs()[0])
	if err := pingWithin(p, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Cut(0); err != nil {
		t.Fatal(err)
	}
	var ne interface{ Timeout() bool }
	if err := pingWithin(probe(t, c.Addrs()[0]), 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING on a new connection through a cut proxy = %v, want a timeout", err)
	}
	if err := c.Heal(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error { return pingWithin(p, 200*time.Millisecond) })
}

func TestDockerLatencyNeedsProxy(t *testing.T) {
	c := labdocker.ForTest(t, 1, nil)
	if err := c.Latency(0, time.Millisecond); err == nil || !strings.Contains(err.Error(), "Options.Proxy") {
		t.Errorf("Latency without Proxy on Docker = %v, want an error naming Options.Proxy", err)
	}
}

func TestLabWithoutDriver(t *testing.T) {
	// lab alone cannot run Docker masters: it says where the backend is.
	_, err := lab.Start(t.Context(), 1, &lab.Options{Backend: lab.Docker})
	if !errors.Is(err, lab.ErrNoDocker) || !strings.Contains(err.Error(), "labdocker") {
		t.Fatalf("lab.Start on Docker without a driver = %v, want ErrNoDocker naming labdocker", err)
	}
}

// What a crashed run leaves (labelled with a process that has exited) is
// removed by Sweep; what a live process owns is not.
func TestSweepRemovesCrashedRuns(t *testing.T) {
	if err := labdocker.Available(t.Context()); err != nil {
		t.Skipf("skipping: needs Docker: %v", err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	id := fmt.Sprintf("sweeptest%d", time.Now().UnixNano())
	labels := func(pid int) []string {
		return []string{"--label", "redlock-lab.cluster=" + id, "--label", "redlock-lab.pid=" + strconv.Itoa(pid), "--label", "redlock-lab.host=" + host}
	}
	image := labdocker.Image("")
	net := "redlock-sweep-" + id
	dockerCLI(t, append(append([]string{"network", "create"}, labels(dead.Process.Pid)...), net)...)
	dockerCLI(t, append(append([]string{"create", "--network", net}, labels(dead.Process.Pid)...), image, "redis-server")...)
	live := dockerCLI(t, append(append([]string{"create"}, labels(os.Getppid())...), image, "redis-server")...)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", live).Run() })
	n, err := labdocker.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Errorf("Sweep removed %d, want at least the dead run's container and network", n)
	}
	label := "label=redlock-lab.cluster=" + id
	if got := dockerCLI(t, "ps", "-aq", "--no-trunc", "--filter", label); got != live {
		t.Errorf("containers of %s after Sweep: %q, want only the live process's %s", id, got, live)
	}
	if got := dockerCLI(t, "network", "ls", "-q", "--filter", label); got != "" {
		t.Errorf("networks of %s after Sweep: %q, want none", id, got)
	}
}
