package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The interop tests with a real redsync are in tests/redsync: importing
// redsync here would put it in the go.sum of every module that imports
// redlock (scripts/check-consumer-deps.sh).

// keyOn returns, per master, the value of key ("" when absent).
func keyOn(t *testing.T, c *lab.Masters, key string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range c.N() {
		v, err := c.Client(i).Get(t.Context(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %q on master %d: %v", key, i, err)
		}
		out[i] = v
	}
	return out
}

// With RedsyncKeys the lock key is "<KeyPrefix><resource>" verbatim, on
// both transports, and the fence counter is that key + ":fence".
func TestRedsyncKeysNaming(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	for _, tc := range []struct {
		name     string
		opts     redlock.Options
		resource string
		key      string
	}{
		{"no prefix", redlock.Options{RedsyncKeys: true}, "invoice:42", "invoice:42"},
		{"via client", redlock.Options{RedsyncKeys: true, ViaClient: true}, "invoice:43", "invoice:43"},
		{"prefix", redlock.Options{RedsyncKeys: true, KeyPrefix: "app:lock:"}, "invoice:44", "app:lock:invoice:44"},
		{"braces are the caller's", redlock.Options{RedsyncKeys: true, KeyPrefix: "{app}:"}, "}x{y}", "{app}:}x{y}"},
		{"fenced", redlock.Options{RedsyncKeys: true, Fencing: true}, "{invoice:45}", "{invoice:45}"},
		{"fenced via client", redlock.Options{RedsyncKeys: true, Fencing: true, ViaClient: true}, "{invoice:46}", "{invoice:46}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocker(t, c, &tc.opts)
			if got, want := l.Options().KeyPrefix, tc.opts.KeyPrefix; got != want {
				t.Fatalf("Options().KeyPrefix = %q, want %q (no default prefix with RedsyncKeys)", got, want)
			}
			lk, err := l.TryLock(t.Context(), tc.resource)
			if err != nil {
				t.Fatal(err)
			}
			// TryLock returned at a majority: the other SETs may still be
			// on their way.
			waitFor(t, "the token on every master", func() bool { return countValue(keyOn(t, c, tc.key), lk.Token()) == c.N() })
			if n := countValue(keyOn(t, c, "redlock:{"+tc.resource+"}"), ""); n != c.N() {
				t.Fatalf("the default-naming key exists on %d masters", c.N()-n)
			}
			if tc.opts.Fencing {
				waitFor(t, "the fence on every master", func() bool {
					for i := range c.N() {
						if f, err := c.Client(i).HGet(t.Context(), tc.key+":fence", "fence").Uint64(); err != nil || f != lk.Fence() {
							return false
						}
					}
					return true
				})
			}
			if err := lk.Extend(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := countValue(keyOn(t, c, tc.key), ""); n != c.N() {
				t.Fatalf("key %q still on %d masters after Unlock", tc.key, c.N()-n)
			}
		})
	}
}

// What RedsyncKeys rejects, and what it accepts that the default naming
// rejects; never a panic.
func TestRedsyncKeysBadInput(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{RedsyncKeys: true})
	lp := newLocker(t, c, &redlock.Options{RedsyncKeys: true, KeyPrefix: "jobs"})
	for _, tc := range []struct {
		name     string
		l        *redlock.Locker
		resource string
		rule     string
	}{
		{"empty resource", l, "", "resource name is empty"},
		{"long resource", l, strings.Repeat("r", 513), "513 bytes, over the 512-byte limit"},
		{"invalid UTF-8", l, "a\xffb", "not valid UTF-8"},
		{"control character", l, "a\x00b", "control character at byte 1"},
		{"a fence counter's name", l, "jobs:fence", `key "jobs:fence" ends in ":fence"`},
		{"a fence counter's name with the prefix", lp, ":fence", `key "jobs:fence" ends in ":fence"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, f := range map[string]func(context.Context, string) (*redlock.Lock, error){
				"TryLock": func(ctx context.Context, r string) (*redlock.Lock, error) { return tc.l.TryLock(ctx, r) },
				"Lock":    func(ctx context.Context, r string) (*redlock.Lock, error) { return tc.l.Lock(ctx, r) },
			} {
				if lk, err := f(t.Context(), tc.resource); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tc.rule) {
					t.Fatalf("%s: %v, %v; want ErrInvalid naming %q", name, lk, err, tc.rule)
				}
			}
			err := tc.l.Do(t.Context(), tc.resource, func(context.Context) error { return nil })
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("Do: %v, want ErrInvalid", err)
			}
		})
	}
	// Accepted here, rejected by the default naming (redlock_test.go's
	// TestBadInput): a leading '}', a prefix with braces; and ":fence"
	// inside a name.
	for _, r := range []string{"}", "}x", "{a}b", "a:fence:b", "fence"} {
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", r, err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock(%q): %v", r, err)
		}
	}
	braced, err := redlock.New(c.Clients(), &redlock.Options{RedsyncKeys: true, KeyPrefix: "{app}:"})
	if err != nil {
		t.Fatalf("New with a braced prefix: %v", err)
	}
	braced.Close()
	if l, err := redlock.New(c.Clients(), &redlock.Options{KeyPrefix: "{app}:"}); !errors.Is(err, redlock.ErrInvalid) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("New with a braced prefix, default naming: %v, want ErrInvalid", err)
	}
	// Neither primitive exists under redsync's naming: a mutex named "x:w"
	// would be the key of x's writer. Refused before anything is sent.
	if s, err := l.Semaphore("x", 2); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "RedsyncKeys") {
		t.Fatalf("Semaphore with RedsyncKeys: %v, %v; want ErrInvalid naming RedsyncKeys", s, err)
	}
	if rw, err := l.RWMutex("x"); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "RedsyncKeys") {
		t.Fatalf("RWMutex with RedsyncKeys: %v, %v; want ErrInvalid naming RedsyncKeys", rw, err)
	}
}
