package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// electionOpts: fenced (terms are fences), and a backoff far longer than
// the tests wait, so that a campaigner that leads in time was woken by the
// release, not by its backoff.
func electionOpts(ttl time.Duration) *redlock.Options {
	return &redlock.Options{Fencing: true, TTL: ttl, MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}}
}

type campaign struct {
	lk  *redlock.Lock
	err error
	e   *redlock.Election
	who string
}

// Three campaigners; two followers observe with one master stalled. Each
// resignation hands leadership to the next campaigner, woken by the
// release (their backoff is a minute); terms grow; both observers see
// every leader, in order; the resigned leader's fenced write is stale.
func TestElectionResignHandsOverAndObserversFollow(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	election := func(who string) *redlock.Election {
		e, err := newLocker(t, c, electionOpts(2*time.Second)).Election("scheduler")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	campaigners := map[string]*redlock.Election{"a": election("a"), "b": election("b"), "c": election("c")}
	reader := election("reader")
	var observed [2]<-chan redlock.Leader
	for i := range observed {
		observed[i] = election("observer").Observe(ctx)
	}
	if err := c.Pause(4); err != nil {
		t.Fatal(err)
	}
	results := make(chan campaign, 3)
	start := func(who string) {
		e := campaigners[who]
		go func() {
			lk, err := e.Campaign(ctx, who+":8080")
			results <- campaign{lk, err, e, who}
		}()
	}
	start("a")
	first := <-results
	if first.err != nil {
		t.Fatal(first.err)
	}
	start("b")
	start("c")
	var terms []uint64
	var values []string
	cur := first
	for round := 0; ; round++ {
		if cur.err != nil {
			t.Fatalf("campaign %d: %v", round, cur.err)
		}
		terms, values = append(terms, cur.lk.Fence()), append(values, cur.who+":8080")
		if n := len(terms); n > 1 && terms[n-1] <= terms[n-2] {
			t.Fatalf("terms %v: not increasing", terms)
		}
		got, err := reader.Leader(ctx)
		if err != nil || got.Term != cur.lk.Fence() || got.Value != cur.who+":8080" || got.Deadline.Before(cur.lk.Deadline()) {
			t.Fatalf("Leader() = %+v, %v; want term %d, value %s:8080, deadline from %v", got, err, cur.lk.Fence(), cur.who, cur.lk.Deadline())
		}
		for i, ch := range observed {
			select {
			case l := <-ch:
				if l.Term != cur.lk.Fence() || l.Value != cur.who+":8080" {
					t.Fatalf("observer %d saw %+v, want term %d of %s", i, l, cur.lk.Fence(), cur.who)
				}
			case <-ctx.Done():
				t.Fatalf("observer %d did not see term %d", i, cur.lk.Fence())
			}
		}
		if round == 2 {
			break
		}
		if err := cur.e.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		resigned := time.Now()
		if cur.lk.Err() == nil {
			t.Fatal("Resign left the leadership's Done open")
		}
		next := <-results // a minute's backoff: only the release can have woken it this soon
		if next.err == nil && time.Since(resigned) > 20*time.Second {
			t.Fatalf("the next campaigner led %v after the resignation", time.Since(resigned))
		}
		cur = next
	}
	// Proclaim moves the value, not the term; observers see it.
	if err := cur.e.Proclaim(ctx, "moved:9090"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range observed {
		if l := <-ch; l.Term != cur.lk.Fence() || l.Value != "moved:9090" {
			t.Fatalf("observer %d after Proclaim: %+v", i, l)
		}
	}
	if err := cur.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.e.Resign(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Fatalf("Resign again: %v, want ErrUnlocked", err)
	}
	if err := cur.e.Proclaim(ctx, "x"); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Proclaim after Resign: %v, want ErrLost", err)
	}
	cancel()
	for _, ch := range observed {
		for range ch { // closed once ctx ends
		}
	}
}

// The leader's process freezes (its Locker closes: no extension, no
// release). Another campaigner leads only after the old leader's
// deadline, with a larger term, and the frozen leader's fenced write is
// then rejected.
func TestElectionFrozenLeaderIsReplacedAfterItsDeadline(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const ttl = time.Second
	frozen := newLocker(t, c, electionOpts(ttl))
	ea, err := frozen.Election("migrations")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	store := c.Client(0)
	if err := redlock.WriteFenced(ctx, store, "schema", a.Fence(), a.Token(), "v1 by a"); err != nil {
		t.Fatal(err)
	}
	eb, err := newLocker(t, c, &redlock.Options{Fencing: true, TTL: ttl, MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}).Election("migrations")
	if err != nil {
		t.Fatal(err)
	}
	deadline := a.Deadline()
	frozen.Close() // frozen: the keeper stops, nothing is released
	b, err := eb.Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if led := time.Now(); !led.After(deadline) {
		t.Fatalf("b led at %v, before a's deadline %v", led, deadline)
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("term %d after term %d", b.Fence(), a.Fence())
	}
	if err := redlock.WriteFenced(ctx, store, "schema", b.Fence(), b.Token(), "v2 by b"); err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(ctx, store, "schema", a.Fence(), a.Token(), "v2 by a"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("the frozen leader's write: %v, want ErrStaleFence", err)
	}
	if err := eb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// Bad input: an election needs Fencing and a valid name; Campaign while
// leading, or with an oversized value, is ErrInvalid; Leader with no
// leader is ErrNoLeader.
func TestElectionRefusesBadInput(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ctx := t.Context()
	if _, err := newLocker(t, c, nil).Election("x"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Election without Fencing: %v, want ErrInvalid", err)
	}
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	if _, err := l.Election(""); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Election(\"\"): %v, want ErrInvalid", err)
	}
	e, err := l.Election("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, redlock.ErrNoLeader) {
		t.Fatalf("Leader of an empty election: %v, want ErrNoLeader", err)
	}
	if _, err := e.Campaign(ctx, string(make([]byte, 65<<10))); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Campaign with a 65 KiB value: %v, want ErrInvalid", err)
	}
	lk, err := e.Campaign(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, "two"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Campaign while leading: %v, want ErrInvalid", err)
	}
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"Campaign": func() error { _, err := e.Campaign(nilCtx, "v"); return err },
		"Proclaim": func() error { return e.Proclaim(nilCtx, "v") },
		"Resign":   func() error { return e.Resign(nilCtx) },
		"Leader":   func() error { _, err := e.Leader(nilCtx); return err },
	} {
		if err := call(); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("%s(nil ctx): %v, want ErrInvalid", name, err)
		}
	}
	if lk.Valid() != true {
		t.Fatal("the leadership ended by refused calls")
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// The election's keys are its own: a mutex of the same name is free.
	m, err := l.TryLock(ctx, "jobs")
	if err != nil {
		t.Fatalf("TryLock of the election's name: %v", err)
	}
	m.Unlock(ctx)
}

// A leader that resigns and campaigns again at once, never having waited
// itself, does not take the leadership back from a campaigner of another
// Locker that queued for it: its release names the waiter, and its own
// next Campaign queues behind it (docs/design.md §21, the liveness bound).
// The backoff is a minute, so the resigned leader could lead first only
// by a round of its own, not by a poll. On the code before, its release
// only announced, and its next round raced the waiter's.
func TestElectionResignedLeaderDoesNotBargeBack(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	election := func() *redlock.Election {
		e, err := newLocker(t, c, electionOpts(2*time.Second)).Election("sched")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for turn := range 5 {
		// New Lockers each turn: none has waited before.
		a, b := election(), election()
		lk, err := a.Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan campaign, 1)
		go func() {
			lk, err := b.Campaign(ctx, "b")
			got <- campaign{lk: lk, err: err}
		}()
		queuedOnMajority(t, c, "redlock:{sched}:e")
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithCancel(ctx)
		again := make(chan campaign, 1)
		go func() {
			lk, err := a.Campaign(actx, "a")
			again <- campaign{lk: lk, err: err}
		}()
		var bl campaign
		select {
		case bl = <-got:
		case al := <-again:
			t.Fatalf("turn %d: the resigned leader led again (term %d, %v) before the waiter it should have named", turn, fence(al.lk), al.err)
		}
		if bl.err != nil || bl.lk.Fence() <= lk.Fence() {
			t.Fatalf("turn %d: the waiter: %v, term %d after %d", turn, bl.err, fence(bl.lk), lk.Fence())
		}
		acancel() // the resigned leader's next Campaign, queued behind
		if al := <-again; al.err == nil {
			t.Fatalf("turn %d: the resigned leader's next Campaign led (term %d) while the waiter led (term %d)", turn, al.lk.Fence(), bl.lk.Fence())
		}
		if err := b.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// queuedOnMajority waits until, on a majority of the masters, key's queue
// holds a member and a Locker listens where a release names its waiters
// (a join refused by a master slow to answer, under load, is sent again
// only on a later poll; the subscription is made after the join).
func queuedOnMajority(t *testing.T, c *lab.Masters, key string) {
	t.Helper()
	waitFor(t, "a waiter in the queue, and listening, on a majority", func() bool {
		n := 0
		for i := range c.N() {
			m, err := c.Client(i).ZCard(t.Context(), key+":waiters").Result()
			chs, err2 := c.Client(i).PubSubChannels(t.Context(), key+":w:*").Result()
			if err == nil && err2 == nil && m > 0 && len(chs) > 0 {
				n++
			}
		}
		return n > c.N()/2
	})
}

func fence(lk *redlock.Lock) uint64 {
	if lk == nil {
		return 0
	}
	return lk.Fence()
}

// A Campaign whose publish falls short campaigns again (design §21,
// liveness): two masters are cut while it takes the lock, so its key is
// on the other three; right after, those two heal and one of the three is
// cut. Four masters answer, a majority, but only two of them hold the
// key, so no publish round can reach a majority. The Campaign gives the
// lock back and campaigns again while its context allows, and leads with
// a later term on the masters that answer, its value published; it does
// not fail with ErrLost.
func TestCampaignCampaignsAgainWhenItsPublishFallsShort(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c, &redlock.Options{Fencing: true, TTL: 2 * time.Second, MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	e, err := l.Election("publish-short")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := range c.N() {
			_ = c.Heal(i)
		}
	})
	for _, i := range []int{0, 1} {
		if err := c.Cut(i); err != nil {
			t.Fatal(err)
		}
	}
	keeps := 0
	redlock.SetAfterKeep(l, func() {
		if keeps++; keeps > 1 {
			return
		}
		// The lock is on masters 2, 3 and 4 (0 and 1 were cut through
		// the round): now 0, 1, 3 and 4 answer, and only 3 and 4 hold it.
		for _, i := range []int{0, 1} {
			if err := c.Heal(i); err != nil {
				t.Error(err)
			}
		}
		if err := c.Cut(2); err != nil {
			t.Error(err)
		}
	})
	lk, err := e.Campaign(ctx, "v")
	if err != nil {
		t.Fatalf("Campaign: %v, want a leadership (4 of 5 masters answer)", err)
	}
	if keeps < 2 {
		t.Fatalf("the Campaign took the lock %d time(s): its first publish did not fall short, the test shows nothing", keeps)
	}
	ld, err := e.Leader(ctx)
	if err != nil || ld.Term != lk.Fence() || ld.Value != "v" {
		t.Fatalf("Leader: %+v, %v; want term %d, value v", ld, err, lk.Fence())
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Campaign whose every publish falls short (its lock key is deleted
// from three masters under it each time) campaigns again while its
// context allows; its context ends during its second publish, and it
// fails with an error wrapping ErrLost, leaving no lock key behind: each
// lock it gave back was released (design §21).
func TestCampaignThatNeverPublishesGivesUpWithItsContext(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true, TTL: 30 * time.Second, MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	e, err := l.Election("never-published")
	if err != nil {
		t.Fatal(err)
	}
	const key = "redlock:{never-published}:e"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	keeps := 0
	redlock.SetAfterKeep(l, func() {
		for i := range 3 {
			if err := c.Client(i).Del(t.Context(), key).Err(); err != nil {
				t.Error(err)
			}
		}
		if keeps++; keeps == 2 {
			cancel()
		}
	})
	lk, err := e.Campaign(ctx, "v")
	if lk != nil || !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Campaign: %v, %v; want no leadership and ErrLost", lk, err)
	}
	if keeps != 2 {
		t.Errorf("the Campaign took the lock %d time(s), want 2 (it campaigns again until its context ends)", keeps)
	}
	// A release a master did not answer in time still goes out on its
	// stream: wait for it rather than for a loaded machine's timing (the
	// TTL, 30 s, is longer than waitFor waits: an expiry cannot pass).
	waitFor(t, "no lock key on any master", func() bool {
		for i := range c.N() {
			if n, err := c.Client(i).Exists(t.Context(), key).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
}

// A Close while a Campaign pauses between giving a lock back and
// campaigning again ends the Campaign with ErrClosed (our own Close), not
// the publish's ErrLost, and returns only once the Campaign has.
func TestCampaignClosedWhileItPausesIsClosed(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true, TTL: 30 * time.Second, MasterTimeout: 200 * time.Millisecond,
		Retry: redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}})
	e, err := l.Election("closed-in-pause")
	if err != nil {
		t.Fatal(err)
	}
	const key = "redlock:{closed-in-pause}:e"
	var keeps atomic.Int32
	redlock.SetAfterKeep(l, func() {
		keeps.Add(1)
		for i := range 3 {
			if err := c.Client(i).Del(t.Context(), key).Err(); err != nil {
				t.Error(err)
			}
		}
	})
	got := make(chan campaign, 1)
	go func() {
		lk, err := e.Campaign(t.Context(), "v")
		got <- campaign{lk: lk, err: err}
	}()
	// Given back: the key is on no master (masters 3 and 4 held it until
	// the release; the TTL, 30 s, outlasts waitFor).
	waitFor(t, "the lock given back", func() bool {
		if keeps.Load() == 0 {
			return false
		}
		for i := range c.N() {
			if n, err := c.Client(i).Exists(t.Context(), key).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	l.Close()
	// Close waits for the calls in progress (design §9): when it returns,
	// the Campaign's operation has ended. Only its goroutine's step from
	// the return to the channel may be left, and that is the scheduler's.
	if n := redlock.OpsInProgress(l); n != 0 {
		t.Fatalf("Close returned with %d operations in progress: the Campaign was still running", n)
	}
	r := <-got
	if r.lk != nil || !errors.Is(r.err, redlock.ErrClosed) || errors.Is(r.err, redlock.ErrLost) {
		t.Fatalf("Campaign: %v, %v; want ErrClosed alone", r.lk, r.err)
	}
	if n := keeps.Load(); n != 1 {
		t.Errorf("the Campaign took the lock %d times, want 1 (its pause is a minute)", n)
	}
}
