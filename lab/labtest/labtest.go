// Package labtest holds the checks that the lab's backends share in their
// tests: package lab's process masters and module labdocker's containers
// keep one contract, checked by one function.
package labtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
)

// Probe returns a client that honours ctx deadlines on socket I/O (default
// go-redis clients do not), for checks against paused or cut masters.
func Probe(t testing.TB, addr string) *redis.Client {
	t.Helper()
	cl := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              1,
	})
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// PingWithin pings with a ctx bounded by d.
func PingWithin(cl *redis.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return cl.Ping(ctx).Err()
}

// Eventually polls cond until it returns nil or the deadline passes.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CheckKillRestartEmpty checks the Kill/Restart contract both backends keep:
// a killed master answers nothing, Kill is idempotent, Pause of a killed
// master fails, Restart comes back EMPTY on the same address and the
// long-lived default client reconnects by itself, and Restart of a running
// master empties it too. afterKill, if set, checks backend specifics.
func CheckKillRestartEmpty(t testing.TB, c *lab.Masters, afterKill func()) {
	t.Helper()
	ctx := t.Context()
	addr := c.Addrs()[0]
	if err := c.Client(0).Set(ctx, "survivor", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if afterKill != nil {
		afterKill()
	}
	if err := PingWithin(Probe(t, addr), 200*time.Millisecond); err == nil {
		t.Fatal("PING to a killed master succeeded")
	}
	if err := c.Kill(0); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := c.Pause(0); err == nil {
		t.Fatal("Pause of a killed master succeeded")
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.Addrs()[0]; got != addr {
		t.Fatalf("address after Restart = %s, want %s", got, addr)
	}
	Eventually(t, 5*time.Second, func() error { return c.Client(0).Ping(ctx).Err() })
	if n, err := c.Client(0).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, %v; want 0", n, err)
	}
	if err := c.Client(0).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, func() error {
		n, err := c.Client(0).DBSize(ctx).Result()
		if err == nil && n != 0 {
			return fmt.Errorf("DBSIZE = %d after Restart", n)
		}
		return err
	})
}
