package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// shortMaster is a Master on the client path that can drop the last reply
// of every batch, as a broken adapter would.
type shortMaster struct {
	m     driver.Master
	addr  string
	short bool
}

var _ driver.Master = (*shortMaster)(nil)

func (s *shortMaster) Addr() string { return s.addr }

func (s *shortMaster) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	reps, err := s.m.Do(ctx, cmds)
	if s.short && err == nil {
		reps = reps[:len(reps)-1]
	}
	return reps, err
}

func TestNewMastersRejects(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer cl.Close()
	one := &shortMaster{m: redlock.GoRedisMaster(cl), addr: "a:1"}
	for _, tc := range []struct {
		name    string
		masters []driver.Master
		want    string
	}{
		{"none", nil, "no masters"},
		{"nil", []driver.Master{one, nil}, "master 1 is a nil client"},
		{"nil go-redis client", []driver.Master{driver.GoRedis(nil)}, "master 0 is a nil client"},
		{"same address", []driver.Master{one, &shortMaster{m: one.m, addr: "A:1"}}, "masters 0 and 1 are the same master (a:1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.NewMasters(tc.masters, nil)
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("NewMasters: %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

func TestParseURLInvalid(t *testing.T) {
	if _, err := redlock.NewFromURLs([]string{"http://127.0.0.1:6379"}, nil); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("NewFromURLs(http://...): %v, want ErrInvalid", err)
	}
	_, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:1", "redis://127.0.0.1:2/notadb"}, nil)
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "master 1") {
		t.Fatalf("NewFromURLs with a bad second URL: %v, want ErrInvalid naming master 1", err)
	}
}

// NewFromURLs: the fast path from URLs alone takes and releases a lock.
func TestNewFromURLs(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	var urls []string
	for i := range c.N() {
		urls = append(urls, c.URL(i))
	}
	l, err := redlock.NewFromURLs(urls, &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.TryLock(t.Context(), "by-url")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 3 masters", func() bool { return countValue(keyState(t, c, "by-url"), lk.Token()) == 3 })
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := keyState(t, c, "by-url"); countValue(got, "") != 3 {
		t.Fatalf("keys left after Unlock: %q", got)
	}
}

// A Master that answers a batch with too few replies makes its master
// fail (the outcome of the batch is unknown), never a panic or a reply
// matched to the wrong command.
func TestClientPathShortReplies(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ms := make([]driver.Master, c.N())
	for i, cl := range c.Clients() {
		ms[i] = &shortMaster{m: redlock.GoRedisMaster(cl), addr: c.Addrs()[i], short: i != 0}
	}
	l, err := redlock.NewMasters(ms, &redlock.Options{MasterTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.TryLock(t.Context(), "short")
	var e *redlock.Error
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) || e.Count(quorum.OK) > 1 {
		t.Fatalf("TryLock with 2 of 3 masters answering short: %v, want ErrNotAcquired with at most master 0 OK", err)
	}
	waitFor(t, "no key left", func() bool { return countValue(keyState(t, c, "short"), "") == 3 })
}
