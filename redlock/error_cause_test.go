package redlock_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// closedAddrs returns n addresses on which nothing listens: ports the
// kernel gave a listener, closed again.
func closedAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	return addrs
}

// With no master reachable, the error's message says why (the first cause
// of each kind of failure), not only how many failed: errors.As and
// Nodes[i].Err are not what a log line shows.
func TestErrorNamesTheCause(t *testing.T) {
	for _, path := range []struct {
		name      string
		viaClient bool
	}{{"fast path", false}, {"via client", true}} {
		t.Run(path.name, func(t *testing.T) {
			var clients []redis.UniversalClient
			for _, a := range closedAddrs(t, 5) {
				cl := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
				t.Cleanup(func() { cl.Close() })
				clients = append(clients, cl)
			}
			l, err := redlock.New(clients, &redlock.Options{MasterTimeout: time.Second, ViaClient: path.viaClient})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			_, err = l.TryLock(t.Context(), "unreachable")
			var e *redlock.Error
			if !errors.As(err, &e) || !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("TryLock: %v, want a *redlock.Error wrapping ErrNotAcquired", err)
			}
			t.Log(err)
			if msg := err.Error(); !strings.Contains(msg, "connection refused") {
				t.Fatalf("the message hides the cause: %q", msg)
			}
		})
	}
}
