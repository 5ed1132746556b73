package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// After Close, a held lock may still be on the masters: Extend and Unlock
// say ErrClosed, not ErrLost.
func TestCloseIsNotLoss(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	lk, err := l.TryLock(t.Context(), "closing")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context) error{"Extend": func(ctx context.Context) error { return lk.Extend(ctx) }, "Unlock": lk.Unlock} {
		err := f(t.Context())
		if !errors.Is(err, redlock.ErrClosed) || errors.Is(err, redlock.ErrLost) {
			t.Errorf("%s after Close: %v, want ErrClosed and not ErrLost", name, err)
		}
	}
	if got := keyState(t, c, "closing"); countValue(got, lk.Token()) < 2 {
		t.Fatalf("the lock should still be on a majority: %q", got)
	}
}

// A Close between the two rounds of a fenced acquisition fails it, and
// round one's keys are released before TryLock returns.
func TestCloseBetweenFencedRoundsReleases(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	closed := make(chan struct{})
	var fired atomic.Bool
	redlock.SetBetweenRounds(l, func() {
		if !fired.CompareAndSwap(false, true) {
			return
		}
		go func() { l.Close(); close(closed) }()
		waitFor(t, "the Locker to be closing", func() bool {
			_, err := l.TryLock(t.Context(), "other")
			return errors.Is(err, redlock.ErrClosed)
		})
	})
	_, err := l.TryLock(t.Context(), "fenced-close")
	if !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("TryLock: %v, want ErrClosed", err)
	}
	noKeyOn(t, c, "fenced-close", 0, 1, 2, 3, 4)
	<-closed
}

// The same server under two names is not two masters: New refuses
// 127.0.0.1 and localhost for one port, naming both, on every name New
// can see is loopback.
func TestSameServerUnderTwoNames(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	addrs := c.Addrs()
	_, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, alias := range []string{"localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, ":" + port, "127.0.0.1:0" + port} {
		var masters []redis.UniversalClient
		for _, a := range []string{addrs[0], alias, addrs[1]} {
			cl := redis.NewClient(&redis.Options{Addr: a})
			t.Cleanup(func() { cl.Close() })
			masters = append(masters, cl)
		}
		l, err := redlock.New(masters, nil)
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "masters 0 and 1") ||
			!strings.Contains(err.Error(), addrs[0]) || !strings.Contains(err.Error(), strings.ToLower(alias)) {
			t.Errorf("New over %s and %s: %v, want ErrInvalid naming masters 0 and 1 and both addresses", addrs[0], alias, err)
		}
	}
}

// One server under a name New cannot tell apart (a dialer of the
// caller's) is caught by its run_id at the first round, and the error
// names both addresses.
func TestSameServerUnderAnUnseenName(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	addrs := c.Addrs()
	const alias = "alias-of-master-0.invalid:6379"
	masters := []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: addrs[0]}),
		redis.NewClient(&redis.Options{Addr: alias, Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addrs[0])
		}}),
		redis.NewClient(&redis.Options{Addr: addrs[1]}),
	}
	for _, cl := range masters {
		t.Cleanup(func() { cl.Close() })
	}
	// Room for the first contact's handshake on a loaded machine: the
	// first round waits for every master to be identified, up to this.
	l, err := redlock.New(masters, &redlock.Options{MasterTimeout: time.Second})
	if err != nil {
		t.Fatalf("New: %v (it cannot see that %s is %s)", err, alias, addrs[0])
	}
	t.Cleanup(func() { l.Close() })
	lk, err := l.TryLock(t.Context(), "aliased")
	if err == nil {
		lk.Unlock(t.Context())
	}
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "masters 0 and 1") ||
		!strings.Contains(err.Error(), addrs[0]) || !strings.Contains(err.Error(), alias) {
		t.Fatalf("TryLock: %v, want ErrInvalid naming masters 0 and 1, %s and %s", err, addrs[0], alias)
	}
	if got := keyState(t, c, "aliased"); countValue(got, "") != 3 {
		t.Fatalf("keys left: %q", got)
	}
}

// startSentinel runs one redis-server in sentinel mode that monitors the
// cluster's masters as m0, m1, ...
func startSentinel(t *testing.T, c *lab.Masters) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("needs redis-server for a sentinel")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	var conf strings.Builder
	fmt.Fprintf(&conf, "port %s\nbind 127.0.0.1\ndir %s\n", port, t.TempDir())
	for i, a := range c.Addrs() {
		h, p, _ := net.SplitHostPort(a)
		fmt.Fprintf(&conf, "sentinel monitor m%d %s %s 1\n", i, h, p)
	}
	file := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, file, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := redis.NewSentinelClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { s.Close() })
	waitFor(t, "the sentinel to know its masters", func() bool {
		for i := range c.N() {
			if _, err := s.GetMasterAddrByName(t.Context(), fmt.Sprintf("m%d", i)).Result(); err != nil {
				return false
			}
		}
		return true
	})
	return addr
}

// Independent Sentinel-managed masters are independent masters, though
// go-redis names every failover client "FailoverClient".
func TestSentinelManagedMasters(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	sentinel := startSentinel(t, c)
	var masters []redis.UniversalClient
	for i := range c.N() {
		cl := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: fmt.Sprintf("m%d", i), SentinelAddrs: []string{sentinel}})
		t.Cleanup(func() { cl.Close() })
		masters = append(masters, cl)
	}
	l := lockerOn(t, c, masters, &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	lk, err := l.TryLock(t.Context(), "sentinel")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 3 masters", func() bool { return countValue(keyState(t, c, "sentinel"), lk.Token()) == 3 })
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	noKeyOn(t, c, "sentinel", 0, 1, 2)
}

// A master stalled for longer than TTL while a SET to it was in flight:
// when it wakes, the SET lands, and the release the Unlock could not
// deliver must follow it, not have been forgotten.
func TestNoStrayKeyAfterALongStall(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const ttl = 500 * time.Millisecond
	clients := c.Clients()
	// A client that gives up on a read after 200 ms, as one configured
	// with a short ReadTimeout would.
	short := redis.NewClient(&redis.Options{Addr: c.Addrs()[0], ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { short.Close() })
	clients[0] = short
	l := lockerOn(t, c, clients, &redlock.Options{TTL: ttl, MasterTimeout: 100 * time.Millisecond})
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(t.Context(), "stray")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock with master 0 stalled: %v", err)
	}
	noKeyOn(t, c, "stray", 1, 2, 3, 4)
	time.Sleep(2 * ttl) // the stall's length: past ReadTimeout + TTL
	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// A key SET at the resume lives a whole TTL unless it is released.
	var n int64
	if !poll(ttl*3/5, func() bool {
		n, err = c.Client(0).Exists(t.Context(), "redlock:{stray}").Result()
		return err == nil && n == 0
	}) {
		t.Fatalf("master 0 still holds the key %v after it woke (EXISTS %d, %v)", time.Since(resumed), n, err)
	}
}
