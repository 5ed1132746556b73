package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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

// noKeyHolds fails t for every master where key holds token (what says
// whose token it is).
func noKeyHolds(t *testing.T, c *lab.Masters, key, token, what string) {
	t.Helper()
	for i := range c.N() {
		if getKey(t, c, i, key) == token {
			t.Errorf("master %d: the key holds %s", i, what)
		}
	}
}

// settles polls cond for up to d and reports whether it came to hold: the
// last masters' commands of a round may still be on their way when the
// call that made it returns. The caller then asserts the state itself,
// so that a failure says what is on the masters.
func settles(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// state is what each master holds for key: the key's value and its queue.
func state(t *testing.T, c *lab.Masters, key string) string {
	t.Helper()
	var b strings.Builder
	for i := range c.N() {
		fmt.Fprintf(&b, "\n  master %d: GET %q, waiters %q", i, getKey(t, c, i, key), zrange(t, c, i, key))
	}
	return b.String()
}

// clean reports whether no master holds key or a queue entry for it.
func clean(t *testing.T, c *lab.Masters, key string) bool {
	t.Helper()
	for i := range c.N() {
		if getKey(t, c, i, key) != "" || len(zrange(t, c, i, key)) != 0 {
			return false
		}
	}
	return true
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

// grantWaits is bWaits on five new masters, with A's Locker default and
// B's on slowRetry (so that only a hand-off acquires soon): A's lock, B's
// Lock in flight and B's grant token.
func grantWaits(t *testing.T, resource string) (c *lab.Masters, key string, lkA *redlock.Lock, got <-chan lockResult, token string) {
	t.Helper()
	c = lab.ForTest(t, 5, nil)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	lkA, got, m := bWaits(t.Context(), t, c, a, b, resource)
	return c, handKey(resource), lkA, got, grantToken(t, m)
}

// takesGrant is B's lock, which must carry its grant token: it acquired by
// the hand-off (or a completion), not by a round of its own.
func takesGrant(t *testing.T, got <-chan lockResult, token string) *redlock.Lock {
	t.Helper()
	lkB := takes(t, got, "B")
	if lkB.Token() != token {
		_ = lkB.Unlock(context.Background())
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	return lkB
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

// A handed lock's validity counts from the join its grants followed,
// never from the release: its Start is before the release by the time it
// waited, and its Deadline is Start + TTL − Drift − SafetyMargin.
func TestHandedLockCountsValidityFromItsJoin(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "handed-validity"
	key := handKey(resource)
	const ttl = 10 * time.Second
	a := newLocker(t, c, &redlock.Options{TTL: ttl})
	b := newLocker(t, c, &redlock.Options{TTL: ttl, Retry: slowRetry})
	ctx := t.Context()
	lkA, got, _ := bWaits(ctx, t, c, a, b, resource)
	time.Sleep(1500 * time.Millisecond)
	u := time.Now()
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takes(t, got, "B")
	defer lkB.Unlock(ctx)
	acq := lkB.Acquisition()
	if acq.TTL != ttl {
		t.Errorf("Acquisition().TTL %v, want %v", acq.TTL, ttl)
	}
	if d := u.Sub(acq.Start); d < time.Second {
		t.Errorf("Acquisition().Start is %v before the release, want ≥ 1s (B joined ~1.5s before it): the validity must count from the join", d)
	}
	if want := acq.Start.Add(acq.TTL - acq.Drift - acq.SafetyMargin); !lkB.Deadline().Equal(want) {
		t.Errorf("Deadline() %v, want Start+TTL−Drift−SafetyMargin = %v (Start %v, TTL %v, Drift %v, SafetyMargin %v)",
			lkB.Deadline(), want, acq.Start, acq.TTL, acq.Drift, acq.SafetyMargin)
	}
	if d := u.Add(ttl - acq.Drift).Sub(lkB.Deadline()); d < time.Second {
		t.Errorf("Deadline() is %v before release+TTL−Drift, want ≥ 1s", d)
	}
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != lkB.Token() && v != "" {
			t.Errorf("master %d: GET %q, want B's token %q", i, v, lkB.Token())
		}
	}
}

// The head of the queue is a grant waiter whose Locker is gone (nobody
// hears its channel): the release takes it off the queue, does not leave
// its token in the key, and hands the key
// to the next waiter, B, which acquires with its grant token, without a
// round of its own: its Start is before the release.
func TestReleaseSkipsAHandedHeadNobodyHears(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "deaf-head"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	ctx := t.Context()
	lkA := holding(t, c, a, resource, true)
	const fake = "0000000000000000.1 10000 faketoken"
	for i := range c.N() {
		if err := c.Client(i).ZAdd(ctx, key+":waiters", redisZ(1, fake)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := lockAsync(ctx, b, resource)
	queued(t, c, key, 2)
	waitSubscribed(t, c, redlock.WakeChannel(b, key))
	for i := range c.N() {
		if q := zrange(t, c, i, key); q[0] != fake {
			t.Fatalf("master %d: queue %q, want the fake waiter at its head", i, q)
		}
	}
	u := time.Now()
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takes(t, got, "B")
	settles(5*time.Second, everyKeyHolds(t, c, key, lkB.Token()))
	for i := range c.N() {
		v := getKey(t, c, i, key)
		if v == "faketoken" {
			t.Errorf("master %d keeps the dead waiter's token in the key", i)
		}
		if v != lkB.Token() {
			t.Errorf("master %d: GET %q, want B's token %q", i, v, lkB.Token())
		}
		for _, m := range zrange(t, c, i, key) {
			if m == fake {
				t.Errorf("master %d still queues the dead waiter", i)
			}
		}
	}
	if d := u.Sub(lkB.Acquisition().Start); d <= 0 {
		t.Errorf("B's Acquisition().Start is %v after the release: B acquired by a round of its own, not by the hand-off", -d)
	}
	if err := lkB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !settles(5*time.Second, func() bool { return clean(t, c, key) }) {
		t.Errorf("after B's Unlock, want no key or queue entry on any master:%s", state(t, c, key))
	}
}

// A handed lock whose member is still in the queue on some masters (it
// reached them again after the release took it off, as a late join
// does): its Unlock takes its own member off every master, and the key is
// not handed back to it.
func TestUnlockOfHandedLockLeavesNoQueueEntry(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "handed-leaves"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	ctx := t.Context()
	lkA, got, m := bWaits(ctx, t, c, a, b, resource)
	if m == "" {
		t.Fatalf("no queue entry for B on master 0:%s", state(t, c, key))
	}
	token := grantToken(t, m)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takes(t, got, "B")
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	settles(5*time.Second, everyKeyHolds(t, c, key, lkB.Token()))
	// B's join reaches masters 0 and 1 again, late: its member is there
	// once more.
	for i := range 2 {
		if err := c.Client(i).ZAdd(ctx, key+":waiters", redisZ(1, m)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lkB.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !settles(5*time.Second, func() bool { return clean(t, c, key) }) {
		t.Errorf("after the Unlock of the handed lock, want no key or queue entry on any master:%s", state(t, c, key))
	}
	noKeyHolds(t, c, key, lkB.Token(), "B's token after its Unlock (handed back to B's own stale entry)")
	for i := range c.N() {
		for _, x := range zrange(t, c, i, key) {
			if x == m {
				t.Errorf("master %d: B's member still in the queue after its Unlock", i)
			}
		}
	}
}

// A grant waiter whose Locker hears none of the grants (every
// announcement lost) and whose context ends after the masters handed it
// the key: Lock returns the context's error, and B gives the key back on
// every master and leaves the queue: no key or queue entry.
func TestGrantWaiterThatGivesUpLeavesNoKey(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "handed-give-up"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry})
	redlock.DropWakes(b)
	ctx := t.Context()
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// B's Locker is subscribed (it only ignores what it hears): the
	// masters' PUBLISH reaches it, and they leave the key handed.
	lkA, got, m := bWaits(bctx, t, c, a, b, resource)
	token := grantToken(t, m)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A majority: A's own lock may have come from a round that missed one
	// master (holding), whose key is then free and not handed on.
	waitFor(t, "the key handed to B on a majority of masters", func() bool {
		n := 0
		for i := range c.N() {
			if getKey(t, c, i, key) == token {
				n++
			}
		}
		return n >= 3
	})
	cancel()
	var err error
	select {
	case r := <-got:
		err = r.err
		if r.lk != nil {
			r.lk.Unlock(ctx)
			t.Fatal("B's Lock acquired though its Locker heard no grant (and its poll is ≥ 2.5s away)")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B's Lock did not return after its context ended")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lock: %v, want an error wrapping context.Canceled", err)
	}
	if !settles(5*time.Second, func() bool { return clean(t, c, key) }) {
		t.Errorf("after the grant waiter gave up, want no key or queue entry on any master:%s", state(t, c, key))
	}
	noKeyHolds(t, c, key, token, "B's grant token")
}

// A grant waiter that gets the lock by a round (with a token not its
// grant token: the release it woke on only announced) leaves no entry in
// the queue (item 5).
func TestGrantWaiterThatWinsARoundLeavesNoRecord(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "round-winner"
	key := handKey(resource)
	a := newLocker(t, c, nil)
	lk := holding(t, c, a, resource, true) // a's Lock waited, and won a round
	defer lk.Unlock(t.Context())
	if !settles(5*time.Second, func() bool {
		for i := range c.N() {
			if len(zrange(t, c, i, key)) != 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("after a grant waiter acquired by a round, want no queue entry on any master:%s", state(t, c, key))
	}
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != lk.Token() {
			t.Errorf("master %d: GET %q, want the round's token %q", i, v, lk.Token())
		}
	}
}

// Two grant waiters, W (the head) and B, each handed the key by two
// masters and neither by a majority (the fifth hands it to nobody): they
// give their grants back and join again until one of them holds the key
// on a majority, well within the TTL. They never hold it together, and
// once both have had it and unlocked, nothing is left on the masters.
func TestSplitGrantsResolve(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "split-grants"
	key := handKey(resource)
	const ttl = 10 * time.Second
	a := newLocker(t, c, &redlock.Options{TTL: ttl})
	w := newLocker(t, c, &redlock.Options{TTL: ttl})
	b := newLocker(t, c, &redlock.Options{TTL: ttl})
	ctx, cancelAll := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancelAll()
	lkA := holding(t, c, a, resource, true)

	var holders atomic.Int32
	type taken struct {
		who string
		at  time.Time
		err error
	}
	events := make(chan taken, 2)
	var mu sync.Mutex
	locks := map[string]*redlock.Lock{}
	var wg sync.WaitGroup
	defer wg.Wait()
	run := func(who string, l *redlock.Locker) {
		wg.Go(func() {
			lk, err := l.Lock(ctx, resource)
			if err != nil {
				events <- taken{who: who, err: err}
				return
			}
			at := time.Now()
			n := holders.Add(1)
			mu.Lock()
			locks[who] = lk
			var both []string
			for other, olk := range locks {
				if other != who && olk.Valid() {
					both = append(both, other)
				}
			}
			mu.Unlock()
			var onMaj int
			for i := range c.N() {
				if getKey(t, c, i, key) == lk.Token() {
					onMaj++
				}
			}
			switch {
			case n != 1:
				err = fmt.Errorf("%s acquired while another holds the lock (%d holders)", who, n)
			case len(both) != 0:
				err = fmt.Errorf("%s acquired while %q still Valid", who, both)
			case onMaj < 3:
				err = fmt.Errorf("%s acquired with its token on %d masters, want a majority", who, onMaj)
			}
			events <- taken{who: who, at: at, err: err}
			time.Sleep(200 * time.Millisecond)
			holders.Add(-1)
			if uerr := lk.Unlock(ctx); uerr != nil {
				t.Errorf("%s: Unlock: %v", who, uerr)
			}
		})
	}
	run("W", w)
	queued(t, c, key, 1)
	run("B", b)
	queued(t, c, key, 2)
	waitSubscribed(t, c, redlock.WakeChannel(w, key))
	waitSubscribed(t, c, redlock.WakeChannel(b, key))
	mW, mB := memberOf(t, c, 0, w, key), memberOf(t, c, 0, b, key)
	if q := zrange(t, c, 0, key); len(q) != 2 || q[0] != mW || q[1] != mB {
		t.Fatalf("master 0: queue %q, want [W B] = [%q %q]", q, mW, mB)
	}
	for i, rm := range [][]string{{mB}, {mB}, {mW}, {mW}, {mW, mB}} {
		for _, id := range rm {
			if err := c.Client(i).ZRem(ctx, key+":waiters", id).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	u := time.Now()
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Masters 0 and 1 hand W the key, 2 and 3 hand B, 4 nobody.
	var split string
	settles(2*time.Second, func() bool {
		var vals []string
		for i := range c.N() {
			vals = append(vals, getKey(t, c, i, key))
		}
		split = fmt.Sprintf("%q", vals)
		return vals[0] != "" && vals[0] == vals[1] && vals[2] != "" && vals[2] == vals[3] && vals[0] != vals[2]
	})
	t.Logf("keys after the release (W's grant token on 0,1, B's on 2,3, if not resolved yet): %s", split)
	seen := 0
	select {
	case e := <-events:
		seen++
		if e.err != nil {
			t.Fatal(e.err)
		}
		if d := e.at.Sub(u); d > 4*time.Second {
			t.Errorf("%s acquired %v after the release, want within 4s (TTL %v): split grants must resolve well before the keys expire", e.who, d, ttl)
		}
		t.Logf("%s acquired first, %v after the release", e.who, e.at.Sub(u))
	case <-time.After(4 * time.Second):
		t.Errorf("neither W nor B acquired within 4s of the release (TTL %v): split grants did not resolve:%s", ttl, state(t, c, key))
	}
	// Both acquire in the end (at the latest once the keys expire and
	// their polls come), one after the other.
	for ; seen < 2; seen++ {
		select {
		case e := <-events:
			if e.err != nil {
				t.Fatal(e.err)
			}
			t.Logf("%s acquired, %v after the release", e.who, e.at.Sub(u))
		case <-time.After(35 * time.Second):
			t.Fatalf("a waiter never acquired:%s", state(t, c, key))
		}
	}
	wg.Wait()
	if !settles(5*time.Second, func() bool { return clean(t, c, key) }) {
		t.Errorf("after both unlocked, want no key or queue entry on any master:%s", state(t, c, key))
	}
}

// A release that finds the key absent on a master (expired there, or
// never set) hands it there to the head that asked for it, as a round of
// the head's own would take it: B is handed the key on all five masters,
// with one SET each, though A's key was gone from master 4.
func TestReleaseHandsAnAbsentKeyToTheHead(t *testing.T) {
	ctx := t.Context()
	c, key, lkA, got, token := grantWaits(t, "absent-handed")
	if err := c.Client(4).Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	before := setCalls(t, c)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takesGrant(t, got, token)
	defer lkB.Unlock(ctx)
	settles(5*time.Second, everyKeyHolds(t, c, key, token))
	after := setCalls(t, c)
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q", i, v, token)
		}
		if d := after[i] - before[i]; d != 1 {
			t.Errorf("master %d ran %d SETs from A's Unlock to B's acquisition, want 1 (the release script's)", i, d)
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

// A handed lock is logged as acquired, as a round's lock is: the Debug
// record "redlock: acquired" with its token, shortened.
func TestHandedLockIsLoggedAsAcquired(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const resource = "handed-logged"
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newLocker(t, c, nil)
	b := newLocker(t, c, &redlock.Options{Retry: slowRetry, Logger: log})
	ctx := t.Context()
	lkA, got, m := bWaits(ctx, t, c, a, b, resource)
	token := grantToken(t, m)
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takes(t, got, "B")
	defer lkB.Unlock(ctx)
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	want := "token=" + token[:6] + "…"
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="redlock: acquired"`) && strings.Contains(line, want) {
			return
		}
	}
	t.Errorf("no Debug record \"redlock: acquired\" with %s for the handed lock; the logs:\n%s", want, logs.String())
}

// A release hands B the key on masters 0 and 1 only: masters 2, 3 and 4
// lost the key and the queue (as a master restarted empty does), so no
// release will ever hand it there, and with a minority B could only give
// back and join again, behind nobody, while the free masters wait for a
// round. B completes with its grant token instead: SET NX on the masters
// that did not hand it over (docs/design.md §14.3 item 5). It then holds
// every master with its grant token, and its validity still counts from
// its join, about 1 s before the release.
func TestMinorityOfGrantsCompletesWhereTheKeyIsFree(t *testing.T) {
	ctx := t.Context()
	c, key, lkA, got, token := grantWaits(t, "complete-grants")
	for i := 2; i < c.N(); i++ {
		if err := c.Client(i).Del(ctx, key, key+":waiters").Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	u := time.Now()
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lkB := takesGrant(t, got, token)
	defer lkB.Unlock(ctx)
	if d := u.Sub(lkB.Acquisition().Start); d < 900*time.Millisecond {
		t.Errorf("Acquisition().Start is %v before the release, want ≥ 0.9s: the validity must count from the join", d)
	}
	settles(5*time.Second, everyKeyHolds(t, c, key, token))
	for i := range c.N() {
		if v := getKey(t, c, i, key); v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q", i, v, token)
		}
	}
}
