package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A waiter gives up while 2 of 5 masters are frozen (SIGSTOP), and its
// Locker closes before they answer: its leave, parked for them, is
// dropped with the Locker. A second after they answer again, no key of
// the resource is left on any master without an expiry (the queue that
// holds its member, a writer's intent), the queue expires within the
// member's life by the master's own clock (PTTL), and within that life
// nothing of the waiter is left at all (docs/design.md §14.1 item 7).
// Every time judged is read from the masters; the test waits for their
// expiry, and bounds no speed.
func TestQueueMemberOfClosedLockerExpires(t *testing.T) {
	cases := []struct {
		name string
		// hold takes the resource with l; wait waits for it with l.
		hold func(t *testing.T, l *redlock.Locker, res string) func()
		wait func(ctx context.Context, l *redlock.Locker, res string) error
		// suffixes of the waiter's keys, after the resource's key.
		suffixes []string
	}{
		{"mutex", func(t *testing.T, l *redlock.Locker, res string) func() {
			lk, err := l.TryLock(t.Context(), res)
			if err != nil {
				t.Fatal(err)
			}
			return func() { lk.Unlock(t.Context()) }
		}, func(ctx context.Context, l *redlock.Locker, res string) error {
			_, err := l.Lock(ctx, res)
			return err
		}, []string{":waiters"}},
		{"writer", func(t *testing.T, l *redlock.Locker, res string) func() {
			rw, err := l.RWMutex(res)
			if err != nil {
				t.Fatal(err)
			}
			lk, err := rw.TryLock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return func() { lk.Unlock(t.Context()) }
		}, func(ctx context.Context, l *redlock.Locker, res string) error {
			rw, err := l.RWMutex(res)
			if err != nil {
				return err
			}
			_, err = rw.Lock(ctx)
			return err
		}, []string{":w:waiters", ":wi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := lab.ForTest(t, 5, nil)
			ctx := t.Context()
			holder := newLocker(t, c, nil)
			const ttl = 2 * time.Second // above 8 × (MaxDelay + MasterTimeout): the life is the TTL
			waiter := newLocker(t, c, &redlock.Options{TTL: ttl, MasterTimeout: 100 * time.Millisecond,
				Retry: redlock.RetryPolicy{MinDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
			res := "gone-" + tc.name
			key := "redlock:{" + res + "}"
			defer tc.hold(t, holder, res)()
			got := make(chan error, 1)
			wctx, cancel := context.WithCancel(ctx)
			go func() { got <- tc.wait(wctx, waiter, res) }()
			queued(t, c, key+strings.TrimSuffix(tc.suffixes[0], ":waiters"), 1)
			frozen := []int{3, 4}
			for _, i := range frozen {
				if err := c.Pause(i); err != nil {
					t.Fatal(err)
				}
			}
			// The waiter's polls go unanswered there: its Locker skips
			// them, and parks what it must still send them.
			waitFor(t, "the frozen masters skipped", func() bool {
				st := waiter.Stats()
				return st[frozen[0]].Skipped && st[frozen[1]].Skipped
			})
			cancel()
			if err := <-got; err == nil {
				t.Fatal("the waiter acquired a held resource")
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
			// Once they answer again, every key of the resource has an
			// expiry (polled, widely, for what they still had to run).
			keysExpire := func() bool {
				for i := range c.N() {
					names, err := c.Client(i).Keys(ctx, key+"*").Result()
					if err != nil {
						return false
					}
					for _, k := range names {
						if pttl, err := c.Client(i).PTTL(ctx, k).Result(); !strings.HasSuffix(k, ":fence") && (err != nil || pttl == -1) {
							return false
						}
					}
				}
				return true
			}
			settles(10*time.Second, keysExpire)
			left := 0
			for i := range c.N() {
				cl := c.Client(i)
				names, err := cl.Keys(ctx, key+"*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range names {
					if strings.HasSuffix(k, ":fence") {
						continue // counters stay by design (§5)
					}
					pttl, err := cl.PTTL(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case pttl == -1: // go-redis: -1 ns for a key without an expiry
						t.Errorf("master %d: %s has no expiry", i, k)
					case strings.HasSuffix(k, ":waiters") && pttl > ttl:
						t.Errorf("master %d: %s expires in %v, past the member's life %v", i, k, pttl, ttl)
					case strings.HasSuffix(k, ":waiters") && pttl > 0:
						left++
						if i < frozen[0] {
							t.Errorf("master %d answered the leave, yet holds %s", i, k)
						}
					}
				}
			}
			if left == 0 {
				t.Error("no queue was left on the frozen masters: the test did not make the case it is about")
			}
			// Within the life: nothing of the waiter at all, by the
			// masters' expiry.
			var mine []string
			for _, s := range tc.suffixes {
				mine = append(mine, key+s)
			}
			for i := range c.N() {
				waitWithin(t, fmt.Sprintf("master %d to drop %q by their expiry", i, mine), time.Minute, func() bool {
					n, err := c.Client(i).Exists(ctx, mine...).Result()
					return err == nil && n == 0
				})
			}
		})
	}
}
