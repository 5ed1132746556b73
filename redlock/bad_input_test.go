package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A nil context is ErrInvalid naming it, never a panic, for every method
// that takes one; nothing is sent.
func TestNilContext(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	var nilCtx context.Context // a nil interface, as a newcomer passes it
	lk, err := l.TryLock(t.Context(), "nil-ctx")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Keep(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"TryLock":    func() error { _, err := l.TryLock(nilCtx, "x"); return err },
		"TryLockAll": func() error { _, err := l.TryLockAll(nilCtx, []string{"x", "y"}); return err },
		"Lock":       func() error { _, err := l.Lock(nilCtx, "x"); return err },
		"LockAll":    func() error { _, err := l.LockAll(nilCtx, []string{"x", "y"}); return err },
		"Do": func() error {
			return l.Do(nilCtx, "x", func(context.Context) error { return nil })
		},
		"Extend":      func() error { return lk.Extend(nilCtx) },
		"Unlock":      func() error { return lk.Unlock(nilCtx) },
		"WriteFenced": func() error { return redlock.WriteFenced(nilCtx, c.Client(0), "k", 1, "owner", "v") },
		"ReadFenced":  func() error { _, _, err := redlock.ReadFenced(nilCtx, c.Client(0), "k"); return err },
	}
	for name, call := range calls {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = call()
		}()
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "nil context") {
			t.Errorf("%s(nil ctx): %v; want ErrInvalid naming the nil context", name, err)
		}
	}
	if lk, ok := redlock.FromContext(nilCtx); ok || lk != nil {
		t.Errorf("FromContext(nil) = %v, %v", lk, ok)
	}
	noKeyOn(t, c, "x", 0, 1, 2)
	// The lock was left alone by every refused call.
	if lk.Err() != nil || !lk.Valid() {
		t.Fatalf("after the nil-context calls: Err %v, Valid %v", lk.Err(), lk.Valid())
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A second Unlock is ErrUnlocked, not ErrLost; Valid is false after
// Unlock (the deadline itself is unchanged).
func TestUnlockTwiceAndValid(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	ctx := t.Context()
	lk, err := l.TryLock(ctx, "twice")
	if err != nil {
		t.Fatal(err)
	}
	if !lk.Valid() {
		t.Fatal("not Valid right after TryLock")
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if lk.Valid() {
		t.Error("Valid() true after Unlock")
	}
	if !time.Now().Before(lk.Deadline()) {
		t.Error("Unlock moved the deadline")
	}
	err = lk.Unlock(ctx)
	if !errors.Is(err, redlock.ErrUnlocked) || errors.Is(err, redlock.ErrLost) {
		t.Errorf("second Unlock: %v; want ErrUnlocked, not ErrLost", err)
	}

	hl, err := redlock.Hold(l, ctx, "twice-held")
	if err != nil {
		t.Fatal(err)
	}
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if hl.Valid() {
		t.Error("Held: Valid() true after Unlock")
	}
	err = hl.Unlock(ctx)
	if !errors.Is(err, redlock.ErrUnlocked) || errors.Is(err, redlock.ErrLost) {
		t.Errorf("Held: second Unlock: %v; want ErrUnlocked, not ErrLost", err)
	}
	noKeyOn(t, c, "twice", 0, 1, 2)
	noKeyOn(t, c, "twice-held", 0, 1, 2)
}

// TTLs above the 24h limit are ErrInvalid naming the bound, as Options.TTL and
// as WithTTL; math.MaxInt64 too. the limit itself is accepted.
func TestTTLBound(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, nil)
	ctx := t.Context()
	for _, ttl := range []time.Duration{redlock.MaxTTL + time.Millisecond, 100 * 365 * 24 * time.Hour, math.MaxInt64} {
		_, err := redlock.New(c.Clients(), &redlock.Options{TTL: ttl})
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "limit") {
			t.Errorf("New(TTL %v): %v; want ErrInvalid naming the limit", ttl, err)
		}
		if _, err := l.TryLock(ctx, "bound", redlock.WithTTL(ttl)); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "limit") {
			t.Errorf("WithTTL(%v): %v; want ErrInvalid naming the limit", ttl, err)
		}
	}
	noKeyOn(t, c, "bound", 0, 1, 2)
	lk, err := l.TryLock(ctx, "bound", redlock.WithTTL(redlock.MaxTTL))
	if err != nil {
		t.Fatalf("WithTTL(MaxTTL): %v", err)
	}
	// TryLock returns at a majority: master 0's SET may still be on its
	// way.
	waitFor(t, "the key on master 0", func() bool { return c.Client(0).Exists(ctx, "redlock:{bound}").Val() == 1 })
	if d, err := c.Client(0).PTTL(ctx, "redlock:{bound}").Result(); err != nil || d <= redlock.MaxTTL-time.Minute {
		t.Errorf("PTTL with MaxTTL: %v, %v", d, err)
	}
	if err := lk.Extend(ctx, redlock.WithTTL(math.MaxInt64)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Extend(WithTTL(MaxInt64)): %v; want ErrInvalid", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A zero TTL means the default, as Options{TTL: 0} does: WithTTL(0) is
// the Locker's TTL on an acquisition, and on an extension the lock's own
// TTL (as if WithTTL were not passed). A negative TTL is ErrInvalid.
func TestWithTTLZeroMeansTheDefault(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const ttl = 3 * time.Second
	l := newLocker(t, c, &redlock.Options{TTL: ttl})
	ctx := t.Context()
	lk, err := l.TryLock(ctx, "zero-ttl", redlock.WithTTL(0))
	if err != nil {
		t.Fatalf("TryLock(WithTTL(0)): %v", err)
	}
	defer lk.Unlock(ctx)
	if lk.TTL() != ttl {
		t.Errorf("TryLock(WithTTL(0)).TTL() = %v, want Options.TTL %v", lk.TTL(), ttl)
	}
	if d, err := c.Client(0).PTTL(ctx, "redlock:{zero-ttl}").Result(); err != nil || d <= ttl-time.Second || d > ttl {
		t.Errorf("PTTL = %v, %v; want about %v", d, err, ttl)
	}
	if err := lk.Extend(ctx, redlock.WithTTL(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := lk.Extend(ctx, redlock.WithTTL(0)); err != nil || lk.TTL() != 5*time.Second {
		t.Errorf("Extend(WithTTL(0)): %v, TTL %v; want the lock's own 5s", err, lk.TTL())
	}
	sem, err := l.Semaphore("zero-ttl", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.TryAcquire(ctx, redlock.WithTTL(0))
	if err != nil || p.TTL() != ttl {
		t.Fatalf("TryAcquire(WithTTL(0)): %v; want a permit with Options.TTL", err)
	}
	p.Unlock(ctx)
	if _, err := l.TryLock(ctx, "negative-ttl", redlock.WithTTL(-time.Second)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("TryLock(WithTTL(-1s)): %v; want ErrInvalid", err)
	}
}

// New with fewer than 3 masters, or an even number, logs once what that
// tolerates; 3 and 5 log nothing.
func TestNewLogsWeakMasterCounts(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	for n, want := range map[int]string{1: "no master", 2: "no master", 3: "", 4: "1 master", 5: ""} {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		clients := make([]redis.UniversalClient, n)
		for i := range n {
			clients[i] = c.Client(i)
		}
		l, err := redlock.New(clients, &redlock.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		out := buf.String() // what New logged (Close logs its own record)
		l.Close()
		switch {
		case want == "" && out != "":
			t.Errorf("%d masters: logged %q, want nothing", n, out)
		case want != "" && (strings.Count(out, "\n") != 1 || !strings.Contains(out, "tolerate") || !strings.Contains(out, want)):
			t.Errorf("%d masters: logged %q, want one record saying it tolerates %s", n, out, want)
		}
	}
}
