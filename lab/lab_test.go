package lab_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The checks both backends share (package labtest).
var (
	probe                 = labtest.Probe
	pingWithin            = labtest.PingWithin
	eventually            = labtest.Eventually
	checkKillRestartEmpty = labtest.CheckKillRestartEmpty
)

func serverPID(t *testing.T, cl *redis.Client) int {
	t.Helper()
	info, err := cl.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("process_id %q: %v", v, err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO server")
	return 0
}

func TestStartIndependentMasters(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ctx := t.Context()
	if c.N() != 3 {
		t.Fatalf("N() = %d, want 3", c.N())
	}
	addrs := c.Addrs()
	seen := map[string]bool{}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Fatalf("Addrs() = %v: want distinct 127.0.0.1 addresses", addrs)
		}
		seen[a] = true
	}
	for i := range c.N() {
		if c.Client(i) != c.Client(i) {
			t.Fatalf("Client(%d) differs between calls", i)
		}
		if got := c.Client(i).Options().Addr; got != addrs[i] {
			t.Fatalf("Client(%d) addr = %s, want %s", i, got, addrs[i])
		}
		key := fmt.Sprintf("k%d", i)
		if err := c.Client(i).Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET on %d: %v", i, err)
		}
	}
	for i := range c.N() {
		for j := range c.N() {
			got, err := c.Client(i).Get(ctx, fmt.Sprintf("k%d", j)).Result()
			switch {
			case i == j && (err != nil || got != strconv.Itoa(i)):
				t.Errorf("GET k%d on %d = %q, %v; want %d", j, i, got, err, i)
			case i != j && !errors.Is(err, redis.Nil):
				t.Errorf("GET k%d on %d = %q, %v; want redis.Nil (masters must be independent)", j, i, got, err)
			}
		}
	}
}

func TestClientsAreFreshAndClosed(t *testing.T) {
	c, err := lab.Start(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Clients(), c.Clients()
	if len(a) != 2 || a[0] == b[0] || a[0] == c.Client(0) {
		t.Fatalf("Clients() must return new clients on each call")
	}
	for i, cl := range a {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("Clients()[%d] PING: %v", i, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []redis.UniversalClient{a[0], b[1], c.Client(0)} {
		if err := cl.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
			t.Errorf("PING after Close = %v, want redis.ErrClosed", err)
		}
	}
}

func TestPauseResume(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	t.Cleanup(c.ResumeAll)
	p1 := probe(t, c.Addrs()[1])
	if err := pingWithin(p1, time.Second); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	if err := pingWithin(p1, 100*time.Millisecond); err == nil {
		t.Fatal("PING to a paused master succeeded")
	}
	if err := pingWithin(probe(t, c.Addrs()[0]), time.Second); err != nil {
		t.Fatalf("master 0 affected by pausing 1: %v", err)
	}
	if err := c.Resume(1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error { return pingWithin(p1, 200*time.Millisecond) })
}

func TestKillRestartEmptySamePort(t *testing.T) {
	c := lab.ForTest(t, 2, processOnly(t, nil))
	oldPID := serverPID(t, c.Client(0))
	checkKillRestartEmpty(t, c, func() {
		if err := syscall.Kill(oldPID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("pid %d after Kill: %v, want ESRCH", oldPID, err)
		}
	})
	if pid := serverPID(t, c.Client(0)); pid == oldPID {
		t.Fatalf("same pid %d after Restart", pid)
	}
}

func TestJumpClock(t *testing.T) {
	c := lab.ForTest(t, 2, nil)
	ctx := t.Context()
	cl := c.Client(0)
	for _, kv := range []struct {
		key string
		ttl time.Duration
	}{{"long", 10 * time.Second}, {"short", time.Second}, {"forever", 0}} {
		if err := cl.Set(ctx, kv.key, "v", kv.ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Client(1).Set(ctx, "other", "v", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}

	n, err := c.JumpClock(ctx, 0, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("JumpClock affected %d keys, want 2 (long shortened, short deleted)", n)
	}
	if ttl := cl.PTTL(ctx, "long").Val(); ttl <= 0 || ttl > 6*time.Second {
		t.Errorf("PTTL long after 4s jump = %v, want (0, 6s]", ttl)
	}
	if e := cl.Exists(ctx, "short").Val(); e != 0 {
		t.Errorf("key with 1s TTL survived a 4s jump")
	}
	if ttl := cl.PTTL(ctx, "forever").Val(); ttl != -1 {
		t.Errorf("PTTL of key without TTL = %v, want -1 (untouched)", ttl)
	}
	if ttl := c.Client(1).PTTL(ctx, "other").Val(); ttl <= 6*time.Second {
		t.Errorf("jump on master 0 changed master 1: PTTL other = %v", ttl)
	}

	if err := cl.Set(ctx, "px1000", "v", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JumpClock(ctx, 0, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if e := cl.Exists(ctx, "px1000").Val(); e != 0 {
		t.Errorf("key with PX 1000 survived a 2s jump")
	}
	if _, err := c.JumpClock(ctx, 0, -time.Second); err == nil {
		t.Errorf("backward jump accepted")
	}
}

func TestSlow(t *testing.T) {
	c := lab.ForTest(t, 2, nil)
	const d = 300 * time.Millisecond
	p := probe(t, c.Addrs()[1])
	if err := pingWithin(p, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Slow(t.Context(), 1, d); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := pingWithin(p, 5*time.Second); err != nil {
		t.Fatalf("PING after Slow: %v", err)
	}
	// The pause started before Slow returned, so the PING waits a little
	// less than d; 200 ms leaves room for scheduling.
	if el := time.Since(start); el < d-100*time.Millisecond || el > d+time.Second {
		t.Errorf("PING during Slow(%v) took %v", d, el)
	}
	if err := c.Slow(t.Context(), 1, 0); err == nil {
		t.Errorf("Slow with zero duration accepted")
	}
}

func TestProxyFaults(t *testing.T) {
	c := lab.ForTest(t, 3, &lab.Options{Proxy: true})
	ctx := t.Context()
	for i := range c.N() {
		if err := c.Client(i).Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatalf("SET through proxy %d: %v", i, err)
		}
	}

	t.Run("Latency", func(t *testing.T) {
		const d = 100 * time.Millisecond
		p := probe(t, c.Addrs()[0])
		if err := pingWithin(p, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.Latency(0, d); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := pingWithin(p, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 2*d || el > 2*d+time.Second {
			t.Errorf("round trip with %v each way took %v, want about %v", d, el, 2*d)
		}
		if err := c.Latency(0, 0); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := pingWithin(p, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el >= d {
			t.Errorf("round trip after removing latency took %v", el)
		}
	})

	t.Run("DelayOpen", func(t *testing.T) {
		const d = time.Second
		old := probe(t, c.Addrs()[2])
		if err := pingWithin(old, time.Second); err != nil {
			t.Fatal(err)
		}
		if n, err := c.DelayOpen(2, d, 0); err != nil || n < 1 {
			t.Fatalf("DelayOpen = %d, %v; want at least the probe's connection", n, err)
		}
		// The old connection's PING waits d on its way; one on a
		// connection opened afterwards is not delayed, so it answers first.
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- pingWithin(old, 5*time.Second) }()
		if err := pingWithin(probe(t, c.Addrs()[2]), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the delayed connection answered (%v) before a new one", err)
		default:
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < d {
			t.Errorf("PING on the delayed connection took %v, want at least %v", el, d)
		}
		if _, err := c.DelayOpen(2, -1, 0); err == nil {
			t.Error("a negative delay was accepted")
		}
	})

	t.Run("CutHeal", func(t *testing.T) {
		p := probe(t, c.Addrs()[1])
		if err := pingWithin(p, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.Cut(1); err != nil {
			t.Fatal(err)
		}
		if err := pingWithin(p, 200*time.Millisecond); err == nil {
			t.Fatal("PING through a cut proxy succeeded")
		}
		// A new connection is accepted but blackholed: a timeout, not a refusal.
		fresh := probe(t, c.Addrs()[1])
		var ne net.Error
		if err := pingWithin(fresh, 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("PING on a new connection through a cut proxy = %v, want a timeout", err)
		}
		if err := pingWithin(probe(t, c.Addrs()[2]), time.Second); err != nil {
			t.Fatalf("master 2 affected by cutting 1: %v", err)
		}
		if err := c.Heal(1); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error { return pingWithin(p, 200*time.Millisecond) })
		eventually(t, 10*time.Second, func() error {
			got, err := c.Client(1).Get(ctx, "k").Result()
			if err == nil && got != "1" {
				return fmt.Errorf("GET k = %q through healed proxy, want 1", got)
			}
			return err
		})
	})

	t.Run("KillBehindProxy", func(t *testing.T) {
		p := probe(t, c.Addrs()[2])
		if err := c.Kill(2); err != nil {
			t.Fatal(err)
		}
		if err := pingWithin(p, 500*time.Millisecond); err == nil {
			t.Fatal("PING through proxy to a killed master succeeded")
		}
		if err := c.Restart(ctx, 2); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error { return pingWithin(p, 200*time.Millisecond) })
	})
}

func TestProxyFaultsNeedProxy(t *testing.T) {
	c := lab.ForTest(t, 1, processOnly(t, nil))
	for name, err := range map[string]error{
		"Cut":     c.Cut(0),
		"Heal":    c.Heal(0),
		"Latency": c.Latency(0, time.Millisecond),
		"DelayOpen": func() error {
			_, err := c.DelayOpen(0, time.Millisecond, 0)
			return err
		}(),
	} {
		if err == nil || !strings.Contains(err.Error(), "Options.Proxy") {
			t.Errorf("%s without Proxy = %v, want an error naming Options.Proxy", name, err)
		}
	}
}

func TestIndexOutOfRange(t *testing.T) {
	c := lab.ForTest(t, 2, &lab.Options{Proxy: true})
	ctx := t.Context()
	for _, i := range []int{-1, 2, 100} {
		calls := map[string]func() error{
			"Pause":   func() error { return c.Pause(i) },
			"Resume":  func() error { return c.Resume(i) },
			"Kill":    func() error { return c.Kill(i) },
			"Restart": func() error { return c.Restart(ctx, i) },
			"Slow":    func() error { return c.Slow(ctx, i, time.Millisecond) },
			"JumpClock": func() error {
				_, err := c.JumpClock(ctx, i, time.Second)
				return err
			},
			"Cut":     func() error { return c.Cut(i) },
			"Heal":    func() error { return c.Heal(i) },
			"Latency": func() error { return c.Latency(i, time.Millisecond) },
		}
		for name, call := range calls {
			if err := call(); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("%s(%d) = %v, want an out-of-range error", name, i, err)
			}
		}
		if cl := c.Client(i); cl != nil {
			t.Errorf("Client(%d) = %v, want nil", i, cl)
		}
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	c, err := lab.Start(t.Context(), 3, processOnly(t, &lab.Options{Proxy: true}))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for i := range c.N() {
		pids = append(pids, serverPID(t, c.Client(i)))
	}
	// A paused master must die too.
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close waits for the reap, so the pids are gone on return, not eventually.
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("redis-server pid %d after Close: kill -0 = %v, want ESRCH", pid, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Pause(1); err == nil {
		t.Errorf("Pause after Close succeeded")
	}
	if err := c.Restart(t.Context(), 1); err == nil {
		t.Errorf("Restart after Close succeeded")
	}
}

func TestNoRedisServer(t *testing.T) {
	_, err := lab.Start(t.Context(), 1, &lab.Options{Backend: lab.Process, RedisServer: "/nonexistent/redis-server"})
	if !errors.Is(err, lab.ErrNoRedisServer) {
		t.Fatalf("Start with a missing binary = %v, want ErrNoRedisServer", err)
	}
	if !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Errorf("error %q does not say how to install", err)
	}
}

func TestStartFailureQuotesLog(t *testing.T) {
	// /bin/false is found but never answers: Start must fail, not hang, and
	// leave nothing behind (goleak checks the goroutines).
	_, err := lab.Start(t.Context(), 2, &lab.Options{Backend: lab.Process, RedisServer: "false"})
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("Start with a broken binary = %v, want a start error", err)
	}
}

func TestAppendFsyncAlways(t *testing.T) {
	c := lab.ForTest(t, 1, processOnly(t, &lab.Options{AppendFsyncAlways: true}))
	got, err := c.Client(0).ConfigGet(t.Context(), "append*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["appendonly"] != "yes" || got["appendfsync"] != "always" {
		t.Fatalf("CONFIG GET append* = %v, want appendonly yes, appendfsync always", got)
	}
	// A crash (SIGKILL) loses nothing acknowledged; Restart still wipes.
	if err := c.Client(0).Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartPersisted(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Client(0).Get(t.Context(), "k").Result(); err != nil || v != "v" {
		t.Fatalf("after RestartPersisted: %q, %v; want the key kept", v, err)
	}
	if err := c.Restart(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if n := c.Client(0).DBSize(t.Context()).Val(); n != 0 {
		t.Fatalf("after Restart: DBSIZE %d, want 0", n)
	}
	if err := c.RestartPersisted(t.Context(), 5); err == nil {
		t.Fatal("RestartPersisted(5) on 1 master succeeded")
	}
}

// processOnly pins a test that checks process specifics (pids, the
// binary, the proxy requirement, RestartPersisted) to the Process backend,
// whatever REDLOCK_LAB_BACKEND says, and skips it where there is no
// redis-server to run.
func processOnly(t *testing.T, o *lab.Options) *lab.Options {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("skipping: this test needs the Process backend and redis-server is not installed")
	}
	if o == nil {
		o = &lab.Options{}
	}
	o.Backend = lab.Process
	return o
}
