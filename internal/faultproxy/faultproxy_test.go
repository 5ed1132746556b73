package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts an upstream that writes back each line it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); _, _ = io.Copy(c, c) })
		}
	})
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes a line and reads it back within wait.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return r.ReadString('\n')
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForwards(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
}

func TestStallHoldsThenResumeHandsOn(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	if got, err := roundTrip(c, r, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("stalled: %q, %v; want a timeout", got, err)
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after Resume: %q, %v; want what waited", got, err)
	}
}

func TestCutClosesOpenHoldsNewHealForwards(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if _, err := roundTrip(c, r, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("open connection after Cut: %v; want it closed", err)
	}
	c2, r2 := dial(t, p) // accepted and held
	if got, err := roundTrip(c2, r2, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection while cut: %q, %v; want a timeout", got, err)
	}
	p.Heal()
	if _, err := roundTrip(c2, r2, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("held connection after Heal: %v; want it closed", err)
	}
	c3, r3 := dial(t, p)
	if got, err := roundTrip(c3, r3, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

func TestRefuseResetsHealForwards(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Refuse()
	if _, err := roundTrip(c, r, 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("open connection after Refuse: %v; want it reset", err)
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil { // the reset may come at connect
		_, err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
		_ = c2.Close()
		if err == nil || isTimeout(err) {
			t.Fatalf("new connection while refusing: %v; want it reset", err)
		}
	}
	p.Heal()
	c3, r3 := dial(t, p)
	if got, err := roundTrip(c3, r3, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

func TestDelayOpenCountsOpenConnections(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.DelayOpen(time.Hour, 0); n != 1 {
		t.Fatalf("DelayOpen delayed %d connections, want 1", n)
	}
	if got, err := roundTrip(c, r, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("delayed connection: %q, %v; want a timeout", got, err)
	}
	c2, r2 := dial(t, p) // opened later: not delayed
	if got, err := roundTrip(c2, r2, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("later connection: %q, %v", got, err)
	}
}
