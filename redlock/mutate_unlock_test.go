package redlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Unlock on in-memory masters (simDriver), and what it logs: a release
// confirmed by every master (debug), one a master did not confirm (info),
// a lock whose deadline had passed (ErrLost, error), a release an ACL
// denied (ErrInvalid), a nil context and a second Unlock (lock.go:
// Unlock's and unlockKeys' conditions lived negated).
func TestMutateUnlock(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l, ms, clk := simDriverLocker(t, 3, &Options{TTL: time.Second, Logger: log})
	ctx := t.Context()
	take := func(res string) *Lock {
		t.Helper()
		lk, err := l.TryLock(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		return lk
	}
	held := func(key string) (n int) {
		for _, m := range ms {
			if m.run("EXISTS", key).Int == 1 {
				n++
			}
		}
		return n
	}
	logged := func(what, level, msg string) {
		t.Helper()
		if !strings.Contains(buf.String(), "level="+level+` msg="`+msg) {
			t.Errorf("%s: log %q, want %s %q", what, buf.String(), level, msg)
		}
	}

	lk := take("a")
	if err := lk.Unlock(nil); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Unlock(nil): %v, want ErrInvalid", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	if n := held(lk.key); n > 1 {
		t.Errorf("%d of 3 masters still hold the key after Unlock", n)
	}
	logged("Unlock", "DEBUG", "redlock: released")
	if err := lk.Unlock(ctx); !errors.Is(err, ErrUnlocked) {
		t.Errorf("second Unlock: %v, want ErrUnlocked", err)
	}

	// A master that does not confirm the release (an error reply): nil,
	// logged at info.
	lk = take("b")
	rel := sha(t, "release.lua")
	ms[2].refuseWith("", func(args []string) bool { return isScript(args, rel) })
	if err := lk.Unlock(ctx); err != nil {
		t.Errorf("Unlock with a master failing the release: %v", err)
	}
	logged("Unlock unconfirmed by a master", "INFO", "redlock: released with errors")
	ms[2].refuseWith("", nil)

	// The deadline passed: ErrLost, logged as a loss.
	lk = take("c")
	clk.pass(2 * time.Second)
	if err := lk.Unlock(ctx); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "deadline had passed") {
		t.Errorf("Unlock after the deadline: %v, want ErrLost, the deadline passed", err)
	}
	logged("Unlock after the deadline", "ERROR", "redlock: lost")

	// The release refused by an ACL on two masters: ErrInvalid.
	lk = take("d")
	for _, m := range ms[:2] {
		m.refuseWith("NOPERM this user has no permissions to run the 'evalsha' command", func(args []string) bool { return isScript(args, rel) })
	}
	if err := lk.Unlock(context.Background()); !errors.Is(err, ErrInvalid) {
		t.Errorf("Unlock denied by ACL on 2 of 3: %v, want ErrInvalid", err)
	}
}
