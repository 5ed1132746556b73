package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A waiter gives up while 2 of 5 masters are frozen (SIGSTOP), and its
// Locker closes before they answer: its leave never reaches them. Once
// they answer, nothing of it is left there without an expiry, no member
// is kept longer than its life past its last join by the master's own
// clock, and once that life is over nothing of it is left at all
// (docs/design.md §14.1 item 7). Every time read here is the masters'
// (PTTL, TIME), and the waits are for the masters' expiry, not bounds on
// how fast anything runs.
func TestQueueMemberOfClosedLockerExpires(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	holder := newLocker(t, c, nil)
	const ttl = 2 * time.Second // above 8 × (MaxDelay + MasterTimeout): a member's life is the TTL
	waiter := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 100 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
	const res, key = "gone-waiter", "redlock:{gone-waiter}"
	lk, err := holder.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(wctx, res)
		got <- err
	}()
	queued(t, c, key, 1)
	frozen := []int{3, 4}
	for _, i := range frozen {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	// The waiter's polls go unanswered there: its Locker skips them,
	// and parks what it must still send them.
	waitFor(t, "the frozen masters skipped", func() bool {
		st := waiter.Stats()
		return st[frozen[0]].Skipped && st[frozen[1]].Skipped
	})
	cancel()
	if err := <-got; err == nil {
		t.Fatal("Lock succeeded on a held key")
	}
	waitFor(t, "the leave parked for the frozen masters", func() bool {
		st := waiter.Stats()
		return st[frozen[0]].Deferred > 0 && st[frozen[1]].Deferred > 0
	})
	if err := waiter.Close(); err != nil {
		t.Fatal(err)
	}
	for _, i := range frozen {
		if err := c.Resume(i); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever the frozen masters had queued is answered by now: a PING
	// on a connection of their own comes back after it.
	for i := range c.N() {
		if err := c.Client(i).Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	queues := []string{key + ":waiters", key + ":waiters:exp"}
	left := false
	for i := range c.N() {
		cl := c.Client(i)
		for _, q := range queues {
			pttl, err := cl.PTTL(ctx, q).Result()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case pttl == -1: // go-redis: -1 ns for a key without an expiry
				t.Errorf("master %d: %s has no expiry", i, q)
			case pttl > ttl:
				t.Errorf("master %d: %s expires in %v, past the members' life %v", i, q, pttl, ttl)
			case pttl > 0:
				left = true
			}
		}
		members, err := cl.ZRange(ctx, key+":waiters", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		now, err := cl.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			exp, err := cl.ZScore(ctx, key+":waiters:exp", m).Result()
			if err != nil {
				t.Errorf("master %d: member %q has no expiry: %v", i, m, err)
				continue
			}
			if d := time.Duration(exp)*time.Millisecond - time.Duration(now.UnixMilli())*time.Millisecond; d > ttl {
				t.Errorf("master %d: member %q expires in %v, past its life %v", i, m, d, ttl)
			}
		}
		if i < frozen[0] && len(members) > 0 {
			t.Errorf("master %d answered the leave, yet holds %q", i, members)
		}
	}
	if !left {
		t.Error("nothing was left on the frozen masters: the test did not make the case it is about")
	}
	// Within the life: nothing of it at all, by the masters' expiry.
	deadline := time.Now().Add(60 * time.Second)
	for i := range c.N() {
		for {
			n, err := c.Client(i).Exists(ctx, queues...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("master %d still holds the waiter's queue %s after its expiry", i, strconv.Quote(key))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A member whose life is over on every master (its waiter stopped
// joining: its Locker is gone) is dropped by the release that pops it,
// neither named nor handed the key: the release hands on to the live
// waiter behind it, which is woken by it, not by its polls. Unexpired, the
// same member is named in its place (TestDeadWaiterInQueueIsDropped).
func TestReleaseDropsExpiredMember(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	holder := newLocker(t, c, nil)
	waiter := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}})
	ctx := t.Context()
	const key = "redlock:{expired-waiter}"
	lk := holding(t, c, holder, "expired-waiter", true)
	const dead = "0123456789abcdef.1"
	for i := range c.N() {
		cl := c.Client(i)
		now, err := cl.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Score 1: it has waited longer than anyone; its life ended a
		// second ago by this master's clock.
		if err := cl.ZAdd(ctx, key+":waiters", redisZ(1, dead)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ZAdd(ctx, key+":waiters:exp", redisZ(float64(now.UnixMilli()-1000), dead)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := lockThenUnlock(ctx, waiter, "expired-waiter")
	queued(t, c, key, 2)
	waitSubscribed(t, c, redlock.WakeChannel(waiter, key))
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
	if n := redlock.Wakes(waiter); n != 1 {
		t.Errorf("%d wakes, want 1: the release dropped the expired member and handed on to the waiter", n)
	}
	queued(t, c, key, 0)
	for i := range c.N() {
		if n, err := c.Client(i).Exists(ctx, key+":waiters:exp").Result(); err != nil || n != 0 {
			t.Errorf("master %d: the expiries are left behind (%d, %v)", i, n, err)
		}
	}
}
