package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hand-off of the key itself to the head of the masters' queue
// (docs/design.md §14.3), in a memWorld: the test names who waits, when
// each release reaches the masters and when its announcements reach the
// waiters. handoff_test.go keeps the checks on real masters.

// memSlowRetry is a backoff of 5 s: a waiter's timer fires only when the
// test fires it.
var memSlowRetry = RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}

type memResult struct {
	lk  *Lock
	err error
}

// lockIn runs l.Lock(ctx, resource) and sends its result.
func lockIn(ctx context.Context, l *Locker, resource string) <-chan memResult {
	got := make(chan memResult, 1)
	go func() {
		lk, err := l.Lock(ctx, resource)
		got <- memResult{lk, err}
	}()
	return got
}

// result is the Lock result got brings, within 10s.
func result(t *testing.T, got <-chan memResult, who string) memResult {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Lock did not return within 10s", who)
	}
	return memResult{}
}

// lockOf is the lock got brings, which must have been taken.
func lockOf(t *testing.T, got <-chan memResult, who string) *Lock {
	t.Helper()
	r := result(t, got, who)
	if r.err != nil {
		t.Fatalf("%s: Lock: %v", who, r.err)
	}
	return r.lk
}

// releases unlocks lk with its release run on every master before what
// they publish reaches any Locker: the announcements come once the key is
// free, or handed, everywhere.
func (w *memWorld) releases(lk *Lock) {
	w.t.Helper()
	w.hold()
	if err := lk.Unlock(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.flush()
	w.deliver()
}

// waitedLock is a lock on resource taken by l with a Lock that waited for
// another Locker's release (its own release then passes the queue,
// §14.1 item 2), on every master, with the queue empty. The other Locker
// never waited: its release only announces; l's waiter, woken once the
// release has run everywhere, wins a round of its own.
func (w *memWorld) waitedLock(l *Locker, resource string) *Lock {
	w.t.Helper()
	key := lockKey(DefaultKeyPrefix, resource)
	first, _ := w.locker(nil)
	lk1, err := first.TryLock(w.t.Context(), resource)
	if err != nil {
		w.t.Fatal(err)
	}
	asleep := w.asleep()
	got := lockIn(w.t.Context(), l, resource)
	w.sleeping(asleep + 1)
	if !w.queued(key, 1) {
		w.t.Fatalf("the waiter is not alone in the queue on every master:%s", w.state(key))
	}
	w.subscribed(l, key)
	w.releases(lk1)
	lk := lockOf(w.t, got, "the waiter")
	w.flush()
	for i, v := range w.get(key) {
		if v != lk.Token() || len(w.queue(i, key)) != 0 {
			w.t.Fatalf("a Lock that waited: master %d holds %q with queue %q, want its token %q and no queue", i, v, w.queue(i, key), lk.Token())
		}
	}
	return lk
}

// bWaits has a hold resource with a lock whose release passes the queue,
// and b wait for it (Lock, under ctx) in the masters' queue, asleep and
// subscribed to its Locker's channel. It returns A's lock, B's Lock result
// and B's queue member on master 0.
func (w *memWorld) bWaits(ctx context.Context, a, b *Locker, resource string) (*Lock, <-chan memResult, string) {
	w.t.Helper()
	key := lockKey(DefaultKeyPrefix, resource)
	lkA := w.waitedLock(a, resource)
	asleep := w.asleep()
	got := lockIn(ctx, b, resource)
	w.sleeping(asleep + 1)
	if !w.queued(key, 1) {
		w.t.Fatalf("B is not alone in the queue on every master:%s", w.state(key))
	}
	w.subscribed(b, key)
	return lkA, got, w.queue(0, key)[0]
}

// grantOf is the grant token in the queue member m ("<id> <TTL ms>
// <token>"); it fails t when m is not such a member with TTL ttl.
func grantOf(t *testing.T, m string, ttl time.Duration) string {
	t.Helper()
	f := strings.Fields(m)
	if len(f) != 3 || f[1] != fmt.Sprint(ttl.Milliseconds()) {
		t.Fatalf("queue member %q, want \"<id> %d <token>\" (a grant waiter)", m, ttl.Milliseconds())
	}
	return f[2]
}

// wantClean fails the test unless, once every master has run what it
// was sent, no master holds key or a queue entry for it; after says when.
func (w *memWorld) wantClean(key, after string) {
	w.t.Helper()
	w.flush()
	for i := range w.masters {
		if w.run(i, "EXISTS", key, key+queueSuffix).Int != 0 {
			w.t.Errorf("after %s, want no key or queue entry on any master:%s", after, w.state(key))
			return
		}
	}
}

// A handed lock's validity counts from the join its grants followed,
// never from the release: its Start is before the release by the time it
// waited, and its Deadline is Start + TTL − Drift − SafetyMargin.
func TestHandedLockCountsValidityFromItsJoin(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "handed-validity"
	key := lockKey(DefaultKeyPrefix, resource)
	const ttl = 10 * time.Second
	a, _ := w.locker(&Options{TTL: ttl})
	b, _ := w.locker(&Options{TTL: ttl, Retry: memSlowRetry})
	lkA, got, m := w.bWaits(t.Context(), a, b, resource)
	token := grantOf(t, m, ttl)
	if d := w.delays(); len(d) != 1 || d[0] <= 1500*time.Millisecond {
		t.Fatalf("B sleeps %v, want one sleep past the 1.5s the test lets pass", d)
	}
	w.advance(1500 * time.Millisecond) // B waits 1.5s
	u := w.clk.base.Add(w.clk.now())
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	defer lkB.Unlock(context.Background())
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	acq := lkB.Acquisition()
	if acq.TTL != ttl {
		t.Errorf("Acquisition().TTL %v, want %v", acq.TTL, ttl)
	}
	if d := u.Sub(acq.Start); d < 1500*time.Millisecond {
		t.Errorf("Acquisition().Start is %v before the release, want ≥ 1.5s (B joined 1.5s before it): the validity must count from the join", d)
	}
	if want := acq.Start.Add(acq.TTL - acq.Drift - acq.SafetyMargin); !lkB.Deadline().Equal(want) {
		t.Errorf("Deadline() %v, want Start+TTL−Drift−SafetyMargin = %v (Start %v, TTL %v, Drift %v, SafetyMargin %v)",
			lkB.Deadline(), want, acq.Start, acq.TTL, acq.Drift, acq.SafetyMargin)
	}
	if d := u.Add(ttl - acq.Drift).Sub(lkB.Deadline()); d < 1500*time.Millisecond {
		t.Errorf("Deadline() is %v before release+TTL−Drift, want ≥ 1.5s", d)
	}
	w.flush()
	for i, v := range w.get(key) {
		if v != lkB.Token() {
			t.Errorf("master %d: GET %q, want B's token %q", i, v, lkB.Token())
		}
	}
}

// The head of the queue is a grant waiter whose Locker is gone (nobody
// hears its channel): the release takes it off the queue, does not leave
// its token in the key, and hands the key to the next waiter, B, which
// acquires with its grant token, without a round of its own: its Start is
// before the release, and it sent no SET.
func TestReleaseSkipsAHandedHeadNobodyHears(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "deaf-head"
	key := lockKey(DefaultKeyPrefix, resource)
	a, _ := w.locker(nil)
	b, bc := w.locker(&Options{Retry: memSlowRetry})
	lkA := w.waitedLock(a, resource)
	const fake = "0000000000000000.1 10000 faketoken"
	for i := range w.masters {
		w.run(i, "ZADD", key+queueSuffix, "1", fake)
	}
	got := lockIn(t.Context(), b, resource)
	w.sleeping(1)
	if !w.queued(key, 2) {
		t.Fatalf("want the fake waiter and B queued on every master:%s", w.state(key))
	}
	w.subscribed(b, key)
	for i := range w.masters {
		if q := w.queue(i, key); q[0] != fake {
			t.Fatalf("master %d: queue %q, want the fake waiter at its head", i, q)
		}
	}
	token := grantOf(t, w.queue(0, key)[1], DefaultTTL)
	w.advance(100 * time.Millisecond) // B's Start is then before the release
	sets := sentBy(bc, isSet)
	u := w.clk.base.Add(w.clk.now())
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	w.flush()
	for i, v := range w.get(key) {
		if v == "faketoken" {
			t.Errorf("master %d keeps the dead waiter's token in the key", i)
		}
		if v != lkB.Token() || v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q, its lock's %q", i, v, token, lkB.Token())
		}
		if slices.Contains(w.queue(i, key), fake) {
			t.Errorf("master %d still queues the dead waiter", i)
		}
	}
	if d := u.Sub(lkB.Acquisition().Start); d <= 0 {
		t.Errorf("B's Acquisition().Start is %v after the release: B acquired by a round of its own, not by the hand-off", -d)
	}
	if !slices.Equal(sentBy(bc, isSet), sets) {
		t.Errorf("B sent SETs %v (before the release %v): it made a round of its own", sentBy(bc, isSet), sets)
	}
	if err := lkB.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.wantClean(key, "B's Unlock")
}

// A handed lock whose member is still in the queue on some masters (it
// reached them again after the release took it off, as a late join
// does): its Unlock takes its own member off every master, and the key is
// not handed back to it.
func TestUnlockOfHandedLockLeavesNoQueueEntry(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "handed-leaves"
	key := lockKey(DefaultKeyPrefix, resource)
	a, _ := w.locker(nil)
	b, _ := w.locker(&Options{Retry: memSlowRetry})
	lkA, got, m := w.bWaits(t.Context(), a, b, resource)
	token := grantOf(t, m, DefaultTTL)
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	w.flush()
	if v := w.get(key); slices.ContainsFunc(v, func(s string) bool { return s != token }) {
		t.Fatalf("after the hand-off: %q, want B's token everywhere", v)
	}
	// B's join reaches masters 0 and 1 again, late: its member is there
	// once more.
	for i := range 2 {
		w.run(i, "ZADD", key+queueSuffix, "1", m)
	}
	if err := lkB.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.wantClean(key, "the Unlock of the handed lock")
}

// A grant waiter whose Locker hears none of the grants (every
// announcement lost) and whose context ends after the masters handed it
// the key: Lock returns the context's error, and B gives the key back on
// every master and leaves the queue: no key or queue entry.
func TestGrantWaiterThatGivesUpLeavesNoKey(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "handed-give-up"
	key := lockKey(DefaultKeyPrefix, resource)
	a, _ := w.locker(nil)
	b, _ := w.locker(&Options{Retry: memSlowRetry})
	DropWakes(b)
	bctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// B's Locker is subscribed (it only ignores what it hears): the
	// masters' PUBLISH reaches it, and they leave the key handed.
	lkA, got, m := w.bWaits(bctx, a, b, resource)
	token := grantOf(t, m, DefaultTTL)
	w.releases(lkA)
	if v := w.get(key); slices.ContainsFunc(v, func(s string) bool { return s != token }) {
		t.Fatalf("after the release: %q, want the key handed to B (%q) on every master", v, token)
	}
	w.sleeping(1) // B heard nothing: still asleep, its poll 5s away
	cancel()
	r := result(t, got, "B")
	if r.lk != nil {
		r.lk.Unlock(context.Background())
		t.Fatal("B's Lock acquired though its Locker heard no grant (and its poll had not come)")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Lock: %v, want an error wrapping context.Canceled", r.err)
	}
	w.wantClean(key, "the grant waiter gave up")
}

// A grant waiter that gets the lock by a round (with a token not its
// grant token: the release it woke on only announced) leaves no entry in
// the queue (item 5), and holds the key with its round's token.
func TestGrantWaiterThatWinsARoundLeavesNoRecord(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "round-winner"
	key := lockKey(DefaultKeyPrefix, resource)
	a, ac := w.locker(nil)
	joins := sentBy(ac, func(args []string) bool { return isScript(args, sha(t, "join.lua")) })
	lk := w.waitedLock(a, resource) // a's Lock waited, and won a round
	defer lk.Unlock(context.Background())
	for i, n := range sentBy(ac, func(args []string) bool { return isScript(args, sha(t, "join.lua")) }) {
		if n == joins[i] {
			t.Fatalf("master %d: the Lock sent no join: it did not wait in the queue", i)
		}
	}
	w.flush()
	for i, v := range w.get(key) {
		if q := w.queue(i, key); len(q) != 0 {
			t.Errorf("after a grant waiter acquired by a round, master %d queues %q, want nothing", i, q)
		}
		if v != lk.Token() {
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
	w := newMemWorld(t, 5)
	const resource = "split-grants"
	key := lockKey(DefaultKeyPrefix, resource)
	const ttl = 10 * time.Second
	a, _ := w.locker(&Options{TTL: ttl})
	lw, _ := w.locker(&Options{TTL: ttl})
	lb, _ := w.locker(&Options{TTL: ttl})
	ctx, cancel := context.WithCancel(t.Context())
	lkA := w.waitedLock(a, resource)
	type taken struct {
		who string
		lk  *Lock
		err error
	}
	events := make(chan taken, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	run := func(who string, l *Locker) {
		wg.Go(func() {
			lk, err := l.Lock(ctx, resource)
			events <- taken{who, lk, err}
		})
	}
	run("W", lw)
	w.sleeping(1)
	w.advance(time.Millisecond) // B begins after W: the queue's order
	run("B", lb)
	w.sleeping(2)
	w.subscribed(lw, key)
	w.subscribed(lb, key)
	mW, mB := w.queue(0, key)[0], ""
	if q := w.queue(0, key); len(q) == 2 {
		mB = q[1]
	}
	if !w.queued(key, 2) || !strings.HasPrefix(mW, strings.TrimPrefix(WakeChannel(lw, key), key+":w:")+".") {
		t.Fatalf("want [W B] queued on every master:%s", w.state(key))
	}
	for i, rm := range [][]string{{mB}, {mB}, {mW}, {mW}, {mW, mB}} {
		for _, id := range rm {
			w.run(i, "ZREM", key+queueSuffix, id)
		}
	}
	u := w.clk.now()
	w.hold()
	if err := lkA.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w.flush()
	// Masters 0 and 1 hand W the key, 2 and 3 hand B, 4 nobody.
	if v := w.get(key); v[0] == "" || v[0] != v[1] || v[2] == "" || v[2] != v[3] || v[0] == v[2] || v[4] != "" {
		t.Fatalf("the release split the grants %q, want W's on 0 and 1, B's on 2 and 3, none on 4", v)
	}
	w.deliver()
	eventually(t, "W and B woken by their first grants", func() bool { return Wakes(lw) >= 1 && Wakes(lb) >= 1 })
	var got []taken
	check := func(e taken) {
		t.Helper()
		if e.err != nil {
			t.Fatalf("%s: %v", e.who, e.err)
		}
		w.flush()
		on := 0
		for _, v := range w.get(key) {
			if v == e.lk.Token() {
				on++
			}
		}
		if on < 3 {
			t.Errorf("%s acquired with its token on %d masters, want a majority:%s", e.who, on, w.state(key))
		}
		for _, o := range got {
			if o.lk.Valid() {
				t.Errorf("%s acquired while %s still holds", e.who, o.who)
			}
		}
		got = append(got, e)
	}
	// The first: within 4s of the release, on the clock the waiters'
	// timers move, while the other stays asleep.
	w.until("a first acquisition", func() int { return 2 }, 100, func() bool { return len(events) > 0 })
	check(<-events)
	if d := w.clk.now() - u; d > 4*time.Second {
		t.Errorf("%s acquired %v after the release, want within 4s (TTL %v): split grants must resolve well before the keys expire", got[0].who, d, ttl)
	}
	w.sleeping(1) // the other waits, not holding
	if len(events) != 0 {
		t.Fatal("both waiters acquired")
	}
	if err := got[0].lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w.until("the second acquisition", one, 100, func() bool { return len(events) > 0 })
	check(<-events)
	if err := got[1].lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w.wantClean(key, "both unlocked")
}

// A release that finds the key absent on a master (expired there, or
// never set) hands it there to the head that asked for it, as a round of
// the head's own would take it: B is handed the key on all five masters
// though A's key was gone from master 4, and B sends no SET.
func TestReleaseHandsAnAbsentKeyToTheHead(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "absent-handed"
	key := lockKey(DefaultKeyPrefix, resource)
	a, _ := w.locker(nil)
	b, bc := w.locker(&Options{Retry: memSlowRetry})
	lkA, got, m := w.bWaits(t.Context(), a, b, resource)
	token := grantOf(t, m, DefaultTTL)
	w.run(4, "DEL", key)
	sets := sentBy(bc, isSet)
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	defer lkB.Unlock(context.Background())
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	w.flush()
	for i, v := range w.get(key) {
		if v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q", i, v, token)
		}
		if q := w.queue(i, key); len(q) != 0 {
			t.Errorf("master %d: queue %q after the hand-off, want empty", i, q)
		}
	}
	if !slices.Equal(sentBy(bc, isSet), sets) {
		t.Errorf("B sent SETs %v (before the release %v): the release's hand-off is the only SET", sentBy(bc, isSet), sets)
	}
}

// A handed lock is logged as acquired, as a round's lock is: the Debug
// record "redlock: acquired" with its token, shortened.
func TestHandedLockIsLoggedAsAcquired(t *testing.T) {
	w := newMemWorld(t, 5)
	var mu sync.Mutex
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, _ := w.locker(nil)
	b, _ := w.locker(&Options{Retry: memSlowRetry, Logger: log})
	lkA, got, m := w.bWaits(t.Context(), a, b, "handed-logged")
	token := grantOf(t, m, DefaultTTL)
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	defer lkB.Unlock(context.Background())
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	want := "token=" + token[:6] + "…"
	mu.Lock()
	defer mu.Unlock()
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `msg="redlock: acquired"`) && strings.Contains(line, want) {
			return
		}
	}
	t.Errorf("no Debug record \"redlock: acquired\" with %s for the handed lock; the logs:\n%s", want, logs.String())
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A release hands B the key on masters 0 and 1 only: masters 2, 3 and 4
// lost the key and the queue (as a master restarted empty does), so no
// release will ever hand it there, and with a minority B could only give
// back and join again, behind nobody, while the free masters wait for a
// round. B completes with its grant token instead: SET NX on the masters
// that did not hand it over (docs/design.md §14.3 item 5), and on those
// only. It then holds every master with its grant token, and its validity
// still counts from its join, 1 s before the release.
func TestMinorityOfGrantsCompletesWhereTheKeyIsFree(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "complete-grants"
	key := lockKey(DefaultKeyPrefix, resource)
	a, _ := w.locker(nil)
	b, bc := w.locker(&Options{Retry: memSlowRetry})
	lkA, got, m := w.bWaits(t.Context(), a, b, resource)
	token := grantOf(t, m, DefaultTTL)
	for i := 2; i < len(w.masters); i++ {
		w.run(i, "DEL", key, key+queueSuffix)
	}
	if d := w.delays(); len(d) != 1 || d[0] <= time.Second {
		t.Fatalf("B sleeps %v, want one sleep past the 1s the test lets pass", d)
	}
	w.advance(time.Second)
	sets := sentBy(bc, isSet)
	u := w.clk.base.Add(w.clk.now())
	w.releases(lkA)
	// Woken by its grants from masters 0 and 1, B waits its first backoff
	// for the others, then reads every master and completes.
	eventually(t, "B woken by its first grant", func() bool { return Wakes(b) == 1 })
	w.until("B's completion", one, 10, func() bool { return len(got) > 0 })
	lkB := lockOf(t, got, "B")
	defer lkB.Unlock(context.Background())
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	if d := u.Sub(lkB.Acquisition().Start); d < time.Second {
		t.Errorf("Acquisition().Start is %v before the release, want ≥ 1s: the validity must count from the join", d)
	}
	w.flush()
	for i, v := range w.get(key) {
		if v != token {
			t.Errorf("master %d: GET %q, want B's grant token %q", i, v, token)
		}
	}
	for i, n := range sentBy(bc, isSet) {
		want := sets[i]
		if i >= 2 {
			want++
		}
		if n != want {
			t.Errorf("master %d: B sent %d SETs since the release, want %d (SET NX of its grant token where the key was free, only)", i, n-sets[i], want-sets[i])
		}
	}
}

// Adopt of a lock the masters handed over (§14.3): the handed keys were
// set by the release, after the first join of the waiter's token from
// which the holder counts its validity, so the adopted deadline may be
// later than the holder's own, but by no more than the holder's
// Acquisition().Elapsed less MasterTimeout (docs/design.md §16), with the
// millisecond of PTTL's resolution.
func TestAdoptOfHandedLockDeadlineBound(t *testing.T) {
	w := newMemWorld(t, 5)
	const resource = "adopt-handed"
	a, _ := w.locker(nil)
	b, _ := w.locker(&Options{Retry: memSlowRetry})
	lkA, got, m := w.bWaits(t.Context(), a, b, resource)
	token := grantOf(t, m, DefaultTTL)
	// B waits longer than MasterTimeout (50 ms): the handed keys are set
	// that much after its first join, more than Adopt's MasterTimeout
	// makes up for.
	if d := w.delays(); len(d) != 1 || d[0] <= 600*time.Millisecond {
		t.Fatalf("B sleeps %v, want one sleep past the 600ms the test lets pass", d)
	}
	w.advance(600 * time.Millisecond)
	w.releases(lkA)
	lkB := lockOf(t, got, "B")
	defer lkB.Unlock(context.Background())
	if lkB.Token() != token {
		t.Fatalf("B's token %q is not its grant token %q: it did not acquire by the hand-off", lkB.Token(), token)
	}
	adopter, _ := w.locker(nil)
	adopted, err := adopter.Adopt(t.Context(), resource, lkB.Token())
	if err != nil {
		t.Fatal(err)
	}
	nt := adopter.Options().MasterTimeout
	bound := lkB.Deadline().Add(lkB.Acquisition().Elapsed - nt + 2*time.Millisecond)
	if adopted.Deadline().After(bound) {
		t.Errorf("adopted deadline %v after the holder's %v plus its Elapsed %v less MasterTimeout %v",
			adopted.Deadline().Sub(lkB.Deadline()), lkB.Deadline().Format(time.StampMicro), lkB.Acquisition().Elapsed, nt)
	}
	t.Logf("adopted deadline − holder's: %v; bound: Elapsed %v − MasterTimeout %v", adopted.Deadline().Sub(lkB.Deadline()), lkB.Acquisition().Elapsed, nt)
}
