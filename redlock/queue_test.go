package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// queued waits until key's queue holds n waiters on every master.
func queued(t *testing.T, c *lab.Masters, key string, n int64) {
	t.Helper()
	waitFor(t, "the waiters in the masters' queue", func() bool {
		for i := range c.N() {
			if got, err := c.Client(i).ZCard(t.Context(), key+":waiters").Result(); err != nil || got != n {
				return false
			}
		}
		return true
	})
}

// setCalls is how many SET commands each master has executed.
func setCalls(t *testing.T, c *lab.Masters) []int64 { return calls(t, c, "set") }

// calls is how many times each master has executed command name
// (lowercase), scripts' calls included.
func calls(t *testing.T, c *lab.Masters, name string) []int64 {
	t.Helper()
	out := make([]int64, c.N())
	for i := range c.N() {
		info, err := c.Client(i).Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
				n, _, _ := strings.Cut(rest, ",")
				out[i], _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	return out
}

// The release of a lock nobody waited for leaves the queue alone (no
// ZPOPMIN: the cost of the queue stays off the uncontended path); the
// release of a lock taken by a Lock that waited passes it, on every
// master.
func TestReleasePassesTheQueueOnlyAfterAWait(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, nil)
	ctx := t.Context()
	before := calls(t, c, "zpopmin")
	for range 5 {
		lk, err := l.Lock(ctx, "calm")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for m, n := range calls(t, c, "zpopmin") {
		if d := n - before[m]; d != 0 {
			t.Errorf("master %d ran ZPOPMIN %d times for 5 releases of locks nobody waited for, want 0", m, d)
		}
	}
	lk := holding(t, c, l, "busy", true)
	before = calls(t, c, "zpopmin")
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Unlock returns once a majority has answered; the last masters'
	// releases may still be on their way, so wait (widely) for each.
	var after []int64
	settles(5*time.Second, func() bool {
		after = calls(t, c, "zpopmin")
		for m, n := range after {
			if n-before[m] < 1 {
				return false
			}
		}
		return true
	})
	for m, n := range after {
		if d := n - before[m]; d != 1 {
			t.Errorf("master %d ran ZPOPMIN %d times for the release of a lock taken after a wait, want 1", m, d)
		}
	}
}

// holding returns a lock on resource taken by holder: with waited, by a
// Lock that waited for another Locker's release (so its own release hands
// the key on to the masters' queue, docs/design.md §14.1 item 2); without,
// by a TryLock on a free key, whose release only announces (nothing told
// holder that anyone queued). The key's queue is empty afterwards.
func holding(t *testing.T, c *lab.Masters, holder *redlock.Locker, resource string, waited bool) *redlock.Lock {
	t.Helper()
	ctx := t.Context()
	if !waited {
		lk, err := holder.TryLock(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	key := "redlock:{" + resource + "}"
	// The Lock's round may miss a master whose release from first came
	// after its SET: that master's key is then free, and the holder's
	// release cannot hand it on there. The tests want every master held:
	// such a holder is given back, and the setup made again.
	for range 5 {
		lk := waitedFor(t, c, holder, resource)
		if settles(2*time.Second, everyKeyHolds(t, c, key, lk.Token())) {
			return lk
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("a Lock that waited held %q on fewer than all masters five times", resource)
	return nil
}

// waitedFor is holding's lock taken by a Lock that waited.
func waitedFor(t *testing.T, c *lab.Masters, holder *redlock.Locker, resource string) *redlock.Lock {
	t.Helper()
	ctx := t.Context()
	first, err := newLocker(t, c, nil).TryLock(ctx, resource)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lk  *redlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		lk, err := holder.Lock(ctx, resource)
		got <- result{lk, err}
	}()
	key := "redlock:{" + resource + "}"
	queued(t, c, key, 1)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	queued(t, c, key, 0)
	return r.lk
}

// Queue members are scored by when their waiters began: the instant on
// the waiter's clock where it lies within a MasterTimeout of the master's
// reckoning, its TIME less the waiter's age, and that reckoning where it
// does not (docs/design.md §14.1), so hosts whose clocks disagree still
// queue in about the order they began. Two Lockers' waiters join one
// after the other: on every master the first is the head, and each
// member's score lies between the master's TIME before the first began
// and its TIME once both had joined. A member joined with an age of 10 s
// and an instant an hour before that, with a slack of 50 ms, scores 10 s
// before its join and goes ahead of both; with the instant 20 ms before
// its reckoning and a slack of a minute, it scores that instant. The
// releases hand on to the first waiter, then to the second.
func TestQueueScoresWaitersOnTheMastersClock(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	holder := newLocker(t, c, nil)
	slow := &redlock.Options{Retry: slowRetry} // no round but on a release
	waiters := []*redlock.Locker{newLocker(t, c, slow), newLocker(t, c, slow)}
	const resource, key = "scores", "redlock:{scores}"
	lk := holding(t, c, holder, resource, true)
	before := masterTimes(t, c)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type acquired struct {
		waiter int
		lk     *redlock.Lock
	}
	got := make(chan acquired, len(waiters))
	for i, w := range waiters {
		wg.Go(func() {
			if lk, err := w.Lock(wctx, resource); err == nil {
				got <- acquired{i, lk}
			}
		})
		queued(t, c, key, int64(i+1)) // one after the other
	}
	after := masterTimes(t, c)
	const age = 10_000_000 // µs
	for m := range c.N() {
		zs := scoresOn(t, c, m, key, 2)
		if head := zs[0].Member.(string); !strings.HasPrefix(head, lockerID(waiters[0], key)+".") {
			t.Errorf("master %d: head %q, want the waiter that joined first", m, head)
		}
		for _, z := range zs {
			if z.Score < float64(before[m]) || z.Score > float64(after[m]) {
				t.Errorf("master %d: %v scored %.0f, outside this master's TIME %d to %d (µs)", m, z.Member, z.Score, before[m], after[m])
			}
		}
		const slack, hour = 50_000, 3600_000_000 // µs
		joined := masterTimes(t, c)[m]
		if err := redlock.JoinScript().Run(ctx, c.Client(m), []string{key + ":waiters"}, age, "older", 30000, joined-age-hour, slack).Err(); err != nil {
			t.Fatal(err)
		}
		zs = scoresOn(t, c, m, key, 3)
		if zs[0].Member != "older" || zs[0].Score < float64(joined-age) || zs[0].Score > float64(masterTimes(t, c)[m]-age) {
			t.Errorf("master %d: a member joined with an age of %d µs and an instant an hour earlier at TIME %d: queue %v, want it first, scored by TIME less its age", m, age, joined, zs)
		}
		near := joined - age - 20_000
		if err := redlock.JoinScript().Run(ctx, c.Client(m), []string{key + ":waiters"}, age, "near", 30000, near, 60*1000_000).Err(); err != nil {
			t.Fatal(err)
		}
		if s, err := c.Client(m).ZScore(ctx, key+":waiters", "near").Result(); err != nil || s != float64(near) {
			t.Errorf("master %d: a member joined with an instant 20 ms before its reckoning scored %v (%v), want that instant %d", m, s, err, near)
		}
		if err := c.Client(m).ZRem(ctx, key+":waiters", "older", "near").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range waiters {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-got:
			if a.waiter != i {
				t.Errorf("release %d: the lock went to waiter %d, want %d (they joined in that order)", i, a.waiter, i)
			}
			lk = a.lk
		case <-time.After(10 * time.Second):
			t.Fatalf("release %d: no waiter acquired within 10s", i)
		}
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// masterTimes is each master's TIME, in µs.
func masterTimes(t *testing.T, c *lab.Masters) []int64 {
	t.Helper()
	out := make([]int64, c.N())
	for m := range out {
		now, err := c.Client(m).Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[m] = now.UnixMicro()
	}
	return out
}

// scoresOn is key's queue on master m, which must hold n members.
func scoresOn(t *testing.T, c *lab.Masters, m int, key string, n int) []redis.Z {
	t.Helper()
	zs, err := c.Client(m).ZRangeWithScores(t.Context(), key+":waiters", 0, -1).Result()
	if err != nil || len(zs) != n {
		t.Fatalf("master %d: queue %v (%v), want %d members", m, zs, err, n)
	}
	return zs
}
