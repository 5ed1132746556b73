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

// waitAfterRelease holds res with one Locker, makes a second one wait for
// it (its backoff ≥ 2.5s), releases, and returns how long the waiter took
// after the release.
func waitAfterRelease(t *testing.T, c *lab.Masters, res string) time.Duration {
	t.Helper()
	holder := newLocker(t, c, redlock.Options{})
	waiter := newLocker(t, c, redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}})
	lk, err := holder.TryLock(t.Context(), res)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		if lk, err := waiter.Lock(t.Context(), res); err == nil {
			got <- time.Now()
			lk.Unlock(context.WithoutCancel(t.Context()))
		} else {
			t.Error(err)
			close(got)
		}
	}()
	eventuallyOnEach(t, c, func(i int, admin *redis.Client) error {
		n, err := admin.PubSubNumSub(t.Context(), keyOf(res)).Result()
		if err != nil || n[keyOf(res)] == 0 {
			return errors.New("not subscribed yet")
		}
		return nil
	})
	released := time.Now()
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case at := <-got:
		return at.Sub(released)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	return 0
}

// With the README's ACL line over TLS, a release wakes the waiting Lock.
func TestWakeOnReleaseWithACL(t *testing.T) {
	c := secure(t, 5, "")
	if d := waitAfterRelease(t, c, "wake-acl"); d > 2*time.Second {
		t.Fatalf("the waiter acquired %v after the release: not woken", d)
	}
}

// A user without +publish still releases (the script's PUBLISH is under
// pcall): the keys are gone, and the waiter gets the lock on its backoff.
func TestReleaseWithoutPublish(t *testing.T) {
	c := secure(t, 5, "")
	setUser(t, c, "-publish", "+publish")
	d := waitAfterRelease(t, c, "no-publish")
	if d < 2*time.Second {
		t.Fatalf("the waiter acquired %v after the release: woken without PUBLISH?", d)
	}
	// The holder's release deleted the keys (the TTL is 10s: the waiter
	// did not get them by expiry), and so did the waiter's.
	eventuallyOnEach(t, c, func(i int, admin *redis.Client) error {
		if n, err := admin.Exists(t.Context(), keyOf("no-publish")).Result(); err != nil || n != 0 {
			return fmt.Errorf("EXISTS = %d, %v after the waiter's Unlock", n, err)
		}
		return nil
	})
}

// A user without the queue's commands (ZADD, ZREM, ZPOPMIN) still
// releases (the script's ZPOPMIN is under pcall), and the release, naming
// nobody, wakes the waiter as the per-Locker wake did.
func TestWakeWithoutQueueCommands(t *testing.T) {
	c := secure(t, 5, "")
	setUser(t, c, "-zadd -zrem -zpopmin", "+zadd +zrem +zpopmin")
	if d := waitAfterRelease(t, c, "no-queue"); d > 2*time.Second {
		t.Fatalf("the waiter acquired %v after the release: not woken", d)
	}
}

// A user without the grants record's commands (HSET, HGET, HDEL), or
// without PUBSUB NUMSUB (all under pcall in the scripts): a join leaves no
// record, or a release cannot tell whether the head listens, and the
// release names the head instead of handing it the key (redlock's
// docs/design.md §14.3), which wakes it as before.
func TestWakeWithoutGrantCommands(t *testing.T) {
	for _, rules := range []string{"hset -hget -hdel", "pubsub|numsub"} {
		t.Run(rules, func(t *testing.T) {
			c := secure(t, 5, "")
			setUser(t, c, "-"+rules, "+"+strings.ReplaceAll(rules, " -", " +"))
			if d := waitAfterRelease(t, c, "no-grants"); d > 2*time.Second {
				t.Fatalf("the waiter acquired %v after the release: not woken", d)
			}
		})
	}
}

// A user without +pttl: the waiter's read of the holder's PTTLs (wake on
// expiry) and its polls are denied, quietly; the release still wakes it.
func TestWakeWithoutPTTL(t *testing.T) {
	c := secure(t, 5, "")
	setUser(t, c, "-pttl", "+pttl")
	if d := waitAfterRelease(t, c, "no-pttl"); d > 2*time.Second {
		t.Fatalf("the waiter acquired %v after the release: not woken", d)
	}
}
