package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// find returns the records whose message starts with prefix.
func (h *logRecorder) find(prefix string) []slog.Record {
	var out []slog.Record
	for _, r := range h.all() {
		if strings.HasPrefix(r.Message, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// waitRecord polls until a record starting with prefix arrives, and returns
// the latest such.
func waitRecord(t *testing.T, h *logRecorder, prefix string) slog.Record {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if rs := h.find(prefix); len(rs) > 0 {
			return rs[len(rs)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q record; records: %v", prefix, messages(h))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func messages(h *logRecorder) []string {
	var out []string
	for _, r := range h.all() {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.Resolve().String()
			return false
		}
		return true
	})
	return v
}

// A lock's story in the log: acquired and released at Debug on a healthy
// service (nothing above Debug per operation), each record correlated with
// its span; extension failed (Warn), extended after a failure (Info), lost
// with its reason (Error), released with errors (Info), and the Locker's
// shutdown (Info). Every record names the resource by one hash, never by
// its name, and no record carries a token.
func TestLogsTellTheStory(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	logs := &logRecorder{}
	l, _, _ := setup(t, c, redlock.Options{Logger: slog.New(logs), TTL: 1500 * time.Millisecond, MasterTimeout: 150 * time.Millisecond})
	const resource = "story:secret-303"
	var tokens []string

	// Healthy: acquire, extend, release. (Lock: a cold connection's first
	// round may miss the MasterTimeout on a loaded machine.)
	lk, err := l.Lock(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, lk.Token())
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, r := range logs.all() {
		if r.Level > slog.LevelDebug {
			t.Errorf("healthy operations logged %s %q", r.Level, r.Message)
		}
		if !logs.traced[i] {
			t.Errorf("record %q came without the operation's span in its context", r.Message)
		}
	}
	acq, rel := waitRecord(t, logs, "redlock: acquired"), waitRecord(t, logs, "redlock: released")
	hash := attr(acq, "resource")
	if !strings.HasPrefix(hash, "#") || len(hash) != 13 || attr(rel, "resource") != hash {
		t.Fatalf("resource attributes %q and %q: want one keyed hash for the lock's records", hash, attr(rel, "resource"))
	}

	// A kept lock whose extensions fail, then succeed again.
	h, err := l.Lock(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Keep(); err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, h.Token())
	for _, i := range []int{0, 2, 4} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	if r := waitRecord(t, logs, "redlock: extension failed"); r.Level != slog.LevelWarn {
		t.Errorf("extension failed at %s, want WARN", r.Level)
	}
	c.ResumeAll()
	// A stalled master stays skipped until it answers again; the keeper
	// retries while time remains.
	select {
	case <-h.Done():
		t.Logf("lost before an extension succeeded on this loaded machine: %v", h.Err())
	default:
		if r := waitRecord(t, logs, "redlock: extended after a failure"); r.Level != slog.LevelInfo {
			t.Errorf("extended after a failure at %s, want INFO", r.Level)
		}
	}
	h.Unlock(t.Context())

	// A kept lock lost at its deadline: one Error record with the reason.
	err = l.Do(t.Context(), resource, func(ctx context.Context) error {
		for _, i := range []int{0, 2, 4} {
			if err := c.Pause(i); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	})
	c.ResumeAll()
	if !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Do: %v, want ErrLost", err)
	}
	lost := logs.find("redlock: lost")
	if len(lost) != 1 || lost[0].Level != slog.LevelError || attr(lost[0], "reason") != "deadline" {
		t.Fatalf("lost records: %v, want one ERROR with reason=deadline", lost)
	}

	// Released while a master is stalled: Info, and the count. First a
	// lock that every master granted (the masters just resumed are
	// skipped until they answer again).
	deadline := time.Now().Add(15 * time.Second)
	for {
		lk, err = l.Lock(t.Context(), resource)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, lk.Token())
		all := true
		for _, n := range lk.Acquisition().Masters {
			all = all && n.Outcome == quorum.OK
		}
		if all {
			break
		}
		lk.Unlock(t.Context())
		if time.Now().After(deadline) {
			t.Fatal("no acquisition granted by every master after they resumed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := waitRecord(t, logs, "redlock: released with errors")
	if r.Level != slog.LevelInfo || attr(r, "unconfirmed") != "1" {
		t.Errorf("released with errors: %s unconfirmed=%s, want INFO and 1", r.Level, attr(r, "unconfirmed"))
	}
	c.ResumeAll()

	l.Close()
	if r := waitRecord(t, logs, "redlock: locker closed"); r.Level != slog.LevelInfo {
		t.Errorf("shutdown at %s, want INFO", r.Level)
	}
	for _, r := range logs.all() {
		for _, text := range append(flat(r), "msg="+r.Message) {
			for _, sec := range append(tokens, "secret-303") {
				if strings.Contains(text, sec) {
					t.Errorf("log record %q carries %q: %s", r.Message, sec, text)
				}
			}
		}
		if v := attr(r, "resource"); v != "" && v != hash {
			t.Errorf("record %q: resource %q, want the lock's hash %q", r.Message, v, hash)
		}
	}
}

// LogResourceNames shows names; ResourceLabel shows the label and the hash.
func TestLogResourceNamesOption(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	for _, tc := range []struct {
		opts redlock.Options
		want func(string) bool
	}{
		{redlock.Options{LogResourceNames: true}, func(v string) bool { return v == "doc:7" }},
		{redlock.Options{ResourceLabel: func(r string) string { k, _, _ := strings.Cut(r, ":"); return k }},
			func(v string) bool { return strings.HasPrefix(v, "doc#") && len(v) == len("doc#")+12 }},
	} {
		logs := &logRecorder{}
		tc.opts.Logger = slog.New(logs)
		l, _, _ := setup(t, c, tc.opts)
		lk, err := l.TryLock(t.Context(), "doc:7")
		if err != nil {
			t.Fatal(err)
		}
		lk.Unlock(t.Context())
		if v := attr(waitRecord(t, logs, "redlock: acquired"), "resource"); !tc.want(v) {
			t.Errorf("resource attribute %q", v)
		}
	}
}

// A Lock that retries while fewer than a majority of masters answer (here
// mistyped ports: nothing listens) warns once, then at a bounded rate,
// instead of hanging silently.
func TestLockWarnsWithoutMajority(t *testing.T) {
	var clients []redis.UniversalClient
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there any more
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		clients = append(clients, rc)
	}
	logs := &logRecorder{}
	l, err := redlock.New(clients, &redlock.Options{Logger: slog.New(logs), MasterTimeout: 20 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "nowhere:secret-5"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("Lock: %v", err)
	}
	warned := logs.find("redlock: acquisitions keep failing")
	if len(warned) != 1 || warned[0].Level != slog.LevelWarn {
		t.Fatalf("%d warnings in 1.5s of retries, want exactly 1 (then at most one per 10s): %v", len(warned), messages(logs))
	}
	if attr(warned[0], "rounds") == "" {
		t.Errorf("the warning does not say how many rounds")
	}
	for _, r := range logs.all() {
		for _, text := range flat(r) {
			if strings.Contains(text, "secret-5") {
				t.Errorf("record %q carries the resource name: %s", r.Message, text)
			}
		}
	}
}
