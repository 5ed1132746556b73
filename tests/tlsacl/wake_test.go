package tlsacl_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// A user without the queue's commands (ZADD, ZREM, ZPOPMIN), or without
// TIME (join.lua scores a member by the master's clock), still releases
// (the script's ZPOPMIN is under pcall), and the release, naming nobody,
// wakes the waiter as the per-Locker wake did.
func TestWakeWithoutQueueCommands(t *testing.T) {
	c := secure(t, 5, "")
	for i, cmds := range [][]string{{"zadd", "zrem", "zpopmin"}, {"time"}} {
		t.Run(strings.Join(cmds, "-"), func(t *testing.T) {
			setUser(t, c, "-"+strings.Join(cmds, " -"), "+"+strings.Join(cmds, " +"))
			if d := waitAfterRelease(t, c, "no-queue-"+strconv.Itoa(i)); d > 2*time.Second {
				t.Fatalf("the waiter acquired %v after the release: not woken", d)
			}
		})
	}
}

// A user without PUBSUB NUMSUB (under pcall in release.lua): a release
// cannot tell whether the head's Locker listens, and names the head
// instead of handing it the key (redlock's docs/design.md §14.3), which
// wakes it as before; the waiter then takes the key by a round of its
// own, with a token that is not the grant token its queue entry carries.
// The holder waited for its lock, so that its release passes the queue.
func TestWakeWithoutGrantCommands(t *testing.T) {
	c := secure(t, 5, "")
	setUser(t, c, "-pubsub|numsub", "+pubsub|numsub")
	const res = "no-grants"
	ctx := t.Context()
	slow := redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}}
	first, holder, waiter := newLocker(t, c, redlock.Options{}), newLocker(t, c, slow), newLocker(t, c, slow)
	lk0, err := first.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	held := lockIn(ctx, t, holder, res)
	holderID, _, _ := strings.Cut(queuedOnEach(t, c, res, 1)[0], " ")
	// Subscribed to the key's channel, which the first release (it
	// passes no queue) announces on, and to its own.
	subscribedOnEach(t, c, keyOf(res))
	subscribedOnEach(t, c, waiterChannel(res, holderID))
	if err := lk0.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var lk *redlock.Lock
	select {
	case lk = <-held:
	case <-time.After(2 * time.Second):
		t.Fatal("the holder was not woken by the first release")
	}
	if lk == nil {
		t.FailNow()
	}
	got := lockIn(ctx, t, waiter, res)
	members := queuedOnEach(t, c, res, 1)
	f := strings.Fields(members[0])
	if len(f) != 3 {
		t.Fatalf("the waiter's queue entry %q, want \"<id> <TTL ms> <grant token>\"", members[0])
	}
	// Subscribed to its Locker's channel, on which the release names it.
	subscribedOnEach(t, c, waiterChannel(res, f[0]))
	released := time.Now()
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case wl := <-got:
		if wl == nil {
			t.FailNow()
		}
		defer wl.Unlock(context.WithoutCancel(ctx))
		if d := time.Since(released); d > 2*time.Second {
			t.Errorf("the waiter acquired %v after the release: not woken", d)
		}
		if wl.Token() == f[2] {
			t.Errorf("the waiter holds its grant token %q: the release handed it the key without PUBSUB NUMSUB", f[2])
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter never acquired")
	}
}

// lockIn runs l.Lock(ctx, res) and sends its lock (nil on an error, which
// fails t).
func lockIn(ctx context.Context, t *testing.T, l *redlock.Locker, res string) <-chan *redlock.Lock {
	got := make(chan *redlock.Lock, 1)
	go func() {
		lk, err := l.Lock(ctx, res)
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	return got
}

// waiterChannel is the channel a release names the queued waiter id
// ("<Locker id>.<n>") on: only its Locker listens.
func waiterChannel(res, id string) string {
	locker, _, _ := strings.Cut(id, ".")
	return keyOf(res) + ":w:" + locker
}

// subscribedOnEach waits until every master has a subscriber to channel.
func subscribedOnEach(t *testing.T, c *lab.Masters, channel string) {
	t.Helper()
	eventuallyOnEach(t, c, func(i int, admin *redis.Client) error {
		n, err := admin.PubSubNumSub(t.Context(), channel).Result()
		if err != nil || n[channel] == 0 {
			return fmt.Errorf("nobody subscribed to %q yet (%v)", channel, err)
		}
		return nil
	})
}

// queuedOnEach waits until res's queue holds n entries on every master,
// and returns master 0's.
func queuedOnEach(t *testing.T, c *lab.Masters, res string, n int) []string {
	t.Helper()
	var members []string
	eventuallyOnEach(t, c, func(i int, admin *redis.Client) error {
		m, err := admin.ZRange(t.Context(), keyOf(res)+":waiters", 0, -1).Result()
		if err != nil || len(m) != n {
			return fmt.Errorf("queue %q, %v; want %d entries", m, err, n)
		}
		if i == 0 {
			members = m
		}
		return nil
	})
	return members
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
