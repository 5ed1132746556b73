package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Tests of the hand-off of the key itself to the head of the masters'
// queue (docs/design.md §14.3: a queue member "<id> <TTL ms> <grant
// token>", a release that SETs the head's grant token and returns 3).

// handKey is the lock key of resource.
func handKey(resource string) string { return "redlock:{" + resource + "}" }

// lockerID is l's id, the prefix of its waiters' ids ("<id>.<n>"): its
// wake channel for key is key + ":w:" + id.
func lockerID(l *redlock.Locker, key string) string {
	return strings.TrimPrefix(redlock.WakeChannel(l, key), key+":w:")
}

// memberOf is the queue member of l's (one) waiter in key's queue on
// master i, or "" when it has none there.
func memberOf(t *testing.T, c *lab.Masters, i int, l *redlock.Locker, key string) string {
	t.Helper()
	for _, id := range zrange(t, c, i, key) {
		if strings.HasPrefix(id, lockerID(l, key)+".") {
			return id
		}
	}
	return ""
}

// zrange is key's queue on master i, head first.
func zrange(t *testing.T, c *lab.Masters, i int, key string) []string {
	t.Helper()
	ids, err := c.Client(i).ZRange(t.Context(), key+":waiters", 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE on master %d: %v", i, err)
	}
	return ids
}

// grantToken is the grant token in the queue member m ("<id> <TTL ms>
// <token>"); it fails t when m is not such a member with the default TTL.
func grantToken(t *testing.T, m string) string {
	t.Helper()
	f := strings.Fields(m)
	if len(f) != 3 || f[1] != "10000" {
		t.Fatalf("queue member %q, want \"<id> 10000 <token>\" (a grant waiter, default TTL)", m)
	}
	return f[2]
}

// getKey is key's value on master i ("" when absent).
func getKey(t *testing.T, c *lab.Masters, i int, key string) string {
	t.Helper()
	v, err := c.Client(i).Get(t.Context(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET on master %d: %v", i, err)
	}
	return v
}

// everyKeyHolds is the condition that key holds token on every master.
func everyKeyHolds(t *testing.T, c *lab.Masters, key, token string) func() bool {
	return func() bool {
		for i := range c.N() {
			if getKey(t, c, i, key) != token {
				return false
			}
		}
		return true
	}
}

// settles polls cond for up to d and reports whether it came to hold: the
// last masters' commands of a round may still be on their way when the
// call that made it returns. The caller then asserts the state itself,
// so that a failure says what is on the masters.
func settles(d time.Duration, cond func() bool) bool { return poll(d, cond) }

// state is what each master holds for key: the key's value and its queue.
func state(t *testing.T, c *lab.Masters, key string) string {
	t.Helper()
	var b strings.Builder
	for i := range c.N() {
		fmt.Fprintf(&b, "\n  master %d: GET %q, waiters %q", i, getKey(t, c, i, key), zrange(t, c, i, key))
	}
	return b.String()
}

type lockResult struct {
	lk  *redlock.Lock
	err error
}

// lockAsync runs l.Lock(ctx, resource) and sends its result.
func lockAsync(ctx context.Context, l *redlock.Locker, resource string) <-chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		lk, err := l.Lock(ctx, resource)
		got <- lockResult{lk, err}
	}()
	return got
}

// takes waits (up to 10s) for the lock of got.
func takes(t *testing.T, got <-chan lockResult, who string) *redlock.Lock {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("%s: Lock: %v", who, r.err)
		}
		return r.lk
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never acquired", who)
	}
	return nil
}

// bWaits has a hold resource with a lock whose release passes the queue
// (holding), and b wait for it (Lock, under ctx) in the masters' queue,
// subscribed to its Locker's channel. It returns A's lock, B's Lock result
// and B's queue member on master 0.
func bWaits(ctx context.Context, t *testing.T, c *lab.Masters, a, b *redlock.Locker, resource string) (*redlock.Lock, <-chan lockResult, string) {
	t.Helper()
	key := handKey(resource)
	lkA := holding(t, c, a, resource, true)
	got := lockAsync(ctx, b, resource)
	queued(t, c, key, 1)
	waitSubscribed(t, c, redlock.WakeChannel(b, key))
	return lkA, got, memberOf(t, c, 0, b, key)
}

// A release that passes the queue hands the key itself to the head, a
// grant waiter: the head's Lock returns with the key holding its token on
// every master, and the only SET each master ran since the waiter joined
// is the release script's (the waiter made no SET round of its own). The
// release took the waiter's member, which carries its grant token, off
// the queue.
func TestReleaseHandsTheKeyToTheHead(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "handed"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	ctx := t.Context()
	lkA, got, m := bWaits(ctx, t, c, a, b, resource)
	token := grantToken(t, m)
	for i := range c.N() {
		if q := zrange(t, c, i, key); len(q) != 1 || q[0] != m {
			t.Fatalf("master %d: queue %q, want B's member %q after its join:%s", i, q, m, state(t, c, key))
		}
	}
	before := setCalls(t, c)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takes(t, got, "B")
	defer lkB.Unlock(ctx)
	settles(5*time.Second, everyKeyHolds(t, c, key, lkB.Token()))
	after := setCalls(t, c)
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != lkB.Token() || v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q, its lock's token %q (the release hands the key to the head)", i, v, token, lkB.Token())
		}
		if d := after[i] - before[i]; d != 1 {
			t.Errorf("master %d ran %d SETs from B's join to its acquisition, want 1 (the release script's; B makes no round)", i, d)
		}
		if q := zrange(t, c, i, key); len(q) != 0 {
			t.Errorf("master %d: queue %q after the hand-off, want empty", i, q)
		}
	}
}

// Where the key is absent, release.lua hands it only to a head that asked
// for it and whose Locker listens: a head that did not ask is put back
// and the key stays absent; a head that asked but whom nobody hears is
// dropped, and the next that asked is handed the key. Each returns 0 (the
// releaser's key was absent).
func TestReleaseOfAbsentKeyHandsOnlyToAHeadThatAsked(t *testing.T) {
	c := lab.ForTest(t, 1, nil)
	ctx := t.Context()
	cl := c.Client(0)
	key := handKey("absent-script")
	q := key + ":waiters"
	release := redlock.ReleaseScript()
	run := func() int64 {
		t.Helper()
		n, err := release.Run(ctx, cl, []string{key, q}, "gone-token", "", "h").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A head without a grant token (a waiter that did not ask).
	if err := cl.ZAdd(ctx, q, redisZ(1, "1111111111111111.1")).Err(); err != nil {
		t.Fatal(err)
	}
	if n := run(); n != 0 {
		t.Errorf("release of an absent key returned %d, want 0", n)
	}
	if v := getKey(t, c, 0, key); v != "" {
		t.Errorf("GET %q after a release of an absent key with a head that did not ask, want absent", v)
	}
	if m := zrange(t, c, 0, key); len(m) != 1 || m[0] != "1111111111111111.1" {
		t.Errorf("queue %q, want the head that did not ask put back", m)
	}
	// A head that asked, nobody listening for it, before one that asked
	// and is heard.
	heard := "3333333333333333.7 10000 heardtoken"
	if err := cl.Del(ctx, q).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ZAdd(ctx, q, redisZ(1, "2222222222222222.1 10000 deaftoken"), redisZ(2, heard)).Err(); err != nil {
		t.Fatal(err)
	}
	sub := cl.Subscribe(ctx, key+":w:3333333333333333")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n := run(); n != 0 {
		t.Errorf("release of an absent key that handed it on returned %d, want 0", n)
	}
	if v := getKey(t, c, 0, key); v != "heardtoken" {
		t.Errorf("GET %q, want the heard head's token %q", v, "heardtoken")
	}
	if ttl := cl.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("PTTL %v, want the head's TTL (10s)", ttl)
	}
	if m := zrange(t, c, 0, key); len(m) != 0 {
		t.Errorf("queue %q, want both heads taken off", m)
	}
}
