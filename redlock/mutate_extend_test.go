package redlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Extend on in-memory masters (simDriver): it moves the deadline and the
// keys' TTL; refuses a nil context; and names why a round fell short: a
// majority without the token, or a permission refused (lock.go: Extend's
// checks of its context, of its TTL's error and of a refusal lived
// negated).
func TestMutateExtend(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{TTL: time.Second})
	ctx := t.Context()
	lk, err := l.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	before := lk.Deadline()
	if err := lk.Extend(nil); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Extend(nil): %v, want ErrInvalid", err)
	}
	if err := lk.Extend(ctx, WithTTL(3*time.Second)); err != nil {
		t.Fatalf("Extend(WithTTL(3s)): %v", err)
	}
	if moved := lk.Deadline().Sub(before); moved < 1900*time.Millisecond {
		t.Errorf("Extend(WithTTL(3s)) moved the deadline by %v, want about 2s", moved)
	}
	extended := 0 // a majority answered; the last master's may still be on its way
	for _, m := range ms {
		if r := m.run("PTTL", lk.key); r.Int >= 2900 {
			extended++
		}
	}
	if extended < 2 {
		t.Errorf("%d of 3 masters have the key for about 3s after Extend(WithTTL(3s)), want a majority", extended)
	}
	// Refused by permission on two of three masters: the refusal, not a
	// lost lock.
	ext := sha(t, "extend.lua")
	for _, m := range ms[:2] {
		m.refuseWith("NOPERM this user has no permissions to run the 'evalsha' command", func(args []string) bool { return isScript(args, ext) })
	}
	if err := lk.Extend(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("Extend refused by permission on 2 of 3: %v, want ErrInvalid", err)
	}
	// The key gone from two of three: no majority holds the token.
	for _, m := range ms[:2] {
		m.refuseWith("", nil)
		m.run("DEL", lk.key)
	}
	if err := lk.Extend(ctx); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "no majority still holds the token") {
		t.Errorf("Extend with the key gone from 2 of 3: %v, want ErrLost, no majority holding the token", err)
	}
}
