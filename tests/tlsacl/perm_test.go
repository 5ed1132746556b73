package tlsacl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
)

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// setUser applies ACL SETUSER rules to the lab's user on every master, as
// the admin; restore is applied when the test ends (again if already).
func setUser(t *testing.T, c *lab.Masters, rules, restore string) {
	t.Helper()
	if err := aclSet(c, rules); err != nil {
		t.Fatalf("ACL SETUSER %s %s: %v", user, rules, err)
	}
	t.Cleanup(func() {
		if err := aclSet(c, restore); err != nil {
			t.Errorf("restoring ACL SETUSER %s %s: %v", user, restore, err)
		}
	})
}

func aclSet(c *lab.Masters, rules string) error {
	for i := range c.N() {
		args := []any{"ACL", "SETUSER", user}
		for _, r := range strings.Fields(rules) {
			args = append(args, r)
		}
		if err := c.Admin(i).Do(context.Background(), args...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// refusedBound is how long an operation refused by every master may take:
// the refusals come back in one round trip, so far less than this; a hang
// or a retry loop would take the test's whole context.
const refusedBound = 5 * time.Second

// wantRefused checks that err names what was refused (every string in
// want) and wraps ErrInvalid, and that it came within refusedBound.
func wantRefused(t *testing.T, op string, err error, took time.Duration, want ...string) {
	t.Helper()
	t.Logf("%s: %v (after %v)", op, err, took)
	switch {
	case err == nil:
		t.Errorf("%s succeeded; want an error naming %q", op, want)
	case !errors.Is(err, redlock.ErrInvalid):
		t.Errorf("%s = %v; want an error wrapping ErrInvalid", op, err)
	case !containsAll(err.Error(), want...):
		t.Errorf("%s = %v; want it to name %q", op, err, want)
	case took > refusedBound:
		t.Errorf("%s took %v; want within %v", op, took, refusedBound)
	}
}

func timed(f func() error) (error, time.Duration) {
	start := time.Now()
	err := f()
	return err, time.Since(start)
}

// TestEveryRuleNeeded removes each command of lab.DefaultACLRules in turn
// from the user (fresh Lockers, so the connection set-up runs again) and
// checks that the operation that needs it fails with an error wrapping
// ErrInvalid that names it, on both transports; with the rule back, the
// same operation works. PUBLISH, SUBSCRIBE, UNSUBSCRIBE and PING are for
// wake-on-release waiters; TestUserLimits covers them. ZADD, ZREM and
// ZPOPMIN are for the waiters' queue, which is skipped without them
// (TestWakeWithoutQueueCommands); PUBSUB NUMSUB for the hand-off of the
// key itself, without which a release names the head instead
// (TestWakeWithoutGrantCommands).
func TestEveryRuleNeeded(t *testing.T) {
	c := secure(t, 5, "")
	cases := []struct {
		rule    string
		fencing bool
		// run does what needs the rule on l and returns the refusal.
		run  func(t *testing.T, c *lab.Masters, l *redlock.Locker, res string) (error, time.Duration)
		want []string
	}{
		{"set", false, acquire, []string{"NOPERM", "'set'", "SET"}},
		{"evalsha", false, release, []string{"NOPERM", "'evalsha'", "release.lua"}},
		{"evalsha", true, acquire, []string{"NOPERM", "'evalsha'", "acquire_fenced.lua"}},
		{"script|load", false, acquire, []string{"NOPERM", "'script|load'", "SCRIPT LOAD"}},
		{"info", false, acquire, []string{"NOPERM", "'info'", "INFO"}},
		{"get", false, extend, []string{"extend.lua (which calls GET, PTTL, PEXPIRE)", "can't run this command"}},
		{"pexpire", false, extend, []string{"extend.lua (which calls GET, PTTL, PEXPIRE)"}},
		{"del", false, release, []string{"release.lua (which calls GET, ZREM, ZPOPMIN, PUBSUB, ZADD, PEXPIRE, SET, PUBLISH, DEL)"}},
		{"exists", false, acquireAll, []string{"acquire_multi.lua (which calls EXISTS, HGET, SET)"}},
		{"hget", true, acquire, []string{"acquire_fenced.lua (which calls SET, HGET)"}},
		{"hset", true, acquire, []string{"writeback.lua (which calls GET, HGET, HSET)"}},
	}
	for _, tc := range cases {
		name := tc.rule
		if tc.fencing {
			name += "/fencing"
		}
		t.Run(name, func(t *testing.T) {
			for _, tr := range transports {
				t.Run(tr.name, func(t *testing.T) {
					res := "perm-" + strings.ReplaceAll(name, "|", "-") + "-" + tr.name
					opts := redlock.Options{Fencing: tc.fencing, ViaClient: tr.viaClient}
					setUser(t, c, "-"+tc.rule, "+"+tc.rule)
					err, took := tc.run(t, c, newLocker(t, c, opts), res)
					wantRefused(t, "without +"+tc.rule, err, took, tc.want...)
					if t.Failed() {
						return
					}
					// With the rule back, the same operation works.
					if err := aclSet(c, "+"+tc.rule); err != nil {
						t.Fatal(err)
					}
					if err, _ := tc.run(t, c, newLocker(t, c, opts), res+"-ok"); err != nil {
						t.Errorf("with +%s: %v", tc.rule, err)
					}
				})
			}
		})
	}
}

// acquire is TryLock, and on refusal also Lock with no deadline but the
// test's: it must not retry a refused permission.
// acquireAll is acquire for a lock on two resources (TryLockAll).
func acquireAll(t *testing.T, _ *lab.Masters, l *redlock.Locker, res string) (error, time.Duration) {
	return timed(func() error {
		lk, err := l.TryLockAll(t.Context(), []string{res + "-a", res + "-b"})
		if err == nil {
			return lk.Unlock(t.Context())
		}
		return err
	})
}

func acquire(t *testing.T, _ *lab.Masters, l *redlock.Locker, res string) (error, time.Duration) {
	err, took := timed(func() error {
		lk, err := l.TryLock(t.Context(), res)
		if err == nil {
			return lk.Unlock(t.Context())
		}
		return err
	})
	if err == nil {
		return nil, took
	}
	// A second attempt names it too (the set-up refusal is remembered per
	// master), and Lock gives up at once.
	lerr, ltook := timed(func() error {
		// Bounded, so that a Lock that retries fails the test rather
		// than hanging it.
		ctx, cancel := context.WithTimeout(t.Context(), 2*refusedBound)
		defer cancel()
		_, err := l.Lock(ctx, res)
		return err
	})
	if lerr == nil || lerr.Error() == "" || ltook > refusedBound || !errors.Is(lerr, redlock.ErrInvalid) {
		t.Errorf("Lock after a refused TryLock = %v after %v; want ErrInvalid at once", lerr, ltook)
	}
	return err, took
}

// extend takes the lock, then Extend must report the refusal; the lock is
// released (as the admin: the user may not be able to).
func extend(t *testing.T, _ *lab.Masters, l *redlock.Locker, res string) (error, time.Duration) {
	lk, err := l.TryLock(t.Context(), res)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	err, took := timed(func() error { return lk.Extend(t.Context()) })
	if err == nil {
		return nil, took
	}
	if !errors.Is(err, redlock.ErrLost) {
		t.Errorf("refused Extend = %v; want ErrLost too (the deadline was not moved)", err)
	}
	lk.Unlock(t.Context())
	return err, took
}

// release takes the lock, then Unlock must report the refusal rather than
// return nil: the keys are still there (the admin deletes them).
func release(t *testing.T, c *lab.Masters, l *redlock.Locker, res string) (error, time.Duration) {
	lk, err := l.TryLock(t.Context(), res)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	err, took := timed(func() error { return lk.Unlock(t.Context()) })
	if err == nil {
		return nil, took
	}
	onEach(t, c, func(_ int, a *redis.Client) error {
		v, err := a.Get(t.Context(), keyOf(res)).Result()
		if err != nil || v != lk.Token() {
			return fmt.Errorf("after a refused unlock: %q, %v; want the token still there", v, err)
		}
		return a.Del(t.Context(), keyOf(res)).Err()
	})
	return err, took
}

// TestKeyPatternRefused: a user whose keys do not include the Locker's
// prefix gets ErrInvalid naming NOPERM and the keys, on both transports,
// for plain and fenced acquisitions.
func TestKeyPatternRefused(t *testing.T) {
	c := secure(t, 5, "")
	setUser(t, c, "resetkeys ~other:*", "resetkeys ~redlock:*")
	for _, tr := range transports {
		for _, fencing := range []bool{false, true} {
			l := newLocker(t, c, redlock.Options{ViaClient: tr.viaClient, Fencing: fencing})
			err, took := timed(func() error { _, err := l.TryLock(t.Context(), "keys"); return err })
			wantRefused(t, tr.name+" TryLock", err, took, "NOPERM", "keys")
			if !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("%s: %v; want ErrNotAcquired too", tr.name, err)
			}
		}
	}
	// Nothing was written anywhere.
	onEach(t, c, func(_ int, a *redis.Client) error {
		if n, err := a.DBSize(t.Context()).Result(); err != nil || n != 0 {
			t.Errorf("DBSIZE = %d, %v; want 0", n, err)
		}
		return nil
	})
}
