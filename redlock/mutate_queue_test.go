package redlock

import (
	"slices"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The queue's small decisions, each held to its doc comment in memory
// (queue.go's conditions and arithmetic lived mutated against the
// simulator, whose waiters still acquire by polling when the queue
// misleads them, within the liveness bound).
func TestMutateQueueDecisions(t *testing.T) {
	l := &Locker{opts: Options{Retry: RetryPolicy{MaxDelay: 300 * time.Millisecond}, MasterTimeout: 20 * time.Millisecond}}

	// queued: one resource, not a reader, and not redsync's key layout.
	one := target{resource: "a", key: "redlock:{a}"}
	if !l.queued(one) {
		t.Error("queued: a waiter for one resource with the default keys does not join a queue")
	}
	if l.queued(target{resource: "a", key: "redlock:{a}", mode: modeRead}) {
		t.Error("queued: a reader joins the queue")
	}
	if l.queued(target{resource: "a", key: "redlock:{a}", resources: []string{"a", "b"}, keys: []string{"redlock:{a}", "redlock:{b}"}}) {
		t.Error("queued: a lock on several resources joins a queue")
	}
	rs := &Locker{opts: Options{RedsyncKeys: true}}
	if rs.queued(one) {
		t.Error("queued: a waiter joins a queue with RedsyncKeys (no hash tag to share the key's slot)")
	}

	// memberLife: the TTL, or twice four polls' worth (MaxDelay and
	// MasterTimeout each) when longer.
	if got, want := l.memberLife(time.Second), 8*(300+20)*time.Millisecond; got != want {
		t.Errorf("memberLife(1s) = %v, want %v (8 × (MaxDelay + MasterTimeout))", got, want)
	}
	if got := l.memberLife(10 * time.Second); got != 10*time.Second {
		t.Errorf("memberLife(10s) = %v, want the TTL", got)
	}

	// queueLife: only a release that may hand the key itself (releaseHand).
	l.opts.TTL = 10 * time.Second
	for pop, want := range map[releaseQueue]uint64{releaseKeyOnly: 0, releasePop: 0, releaseHand: 10_000, 3: 10_000} {
		if got := l.queueLife(pop); got != want {
			t.Errorf("queueLife(%d) = %d, want %d", pop, got, want)
		}
	}

	// heldElsewhere and heldByMajority: refusals among the masters.
	for n := range 6 {
		err := roundError(n, 5, quorum.Refused, quorum.Unavailable)
		if got := heldElsewhere(err); got != (n > 0) {
			t.Errorf("heldElsewhere with %d of 5 refusing = %v", n, got)
		}
		if got := heldByMajority(err, 3); got != (n >= 3) {
			t.Errorf("heldByMajority with %d of 5 refusing = %v", n, got)
		}
	}
	if heldElsewhere(nil) || heldByMajority(nil, 3) {
		t.Error("a nil error counts as held")
	}

	// writerHeld: another writer's key (why 1) on a majority.
	for _, c := range []struct {
		why  []uint64
		want bool
	}{
		{[]uint64{1, 1, 1, 0, 0}, true},
		{[]uint64{1, 1, 0, 2, 0}, false},
		{[]uint64{1, 1, 1, 1, 1}, true},
		{[]uint64{0, 2, 3, whyNoAnswer, 1}, false},
	} {
		if got := writerHeld(c.why, 3); got != c.want {
			t.Errorf("writerHeld(%v, 3) = %v, want %v", c.why, got, c.want)
		}
	}
}

// probe on in-memory masters: the key is free unless a majority holds
// it, and it expires on a majority at the need-th earliest reply plus
// its PTTL plus the margin (queue.go's probe lived mutated).
func TestMutateProbe(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, nil)
	tg, err := l.target("p")
	if err != nil {
		t.Fatal(err)
	}
	for held := range 4 {
		for i, m := range ms {
			m.run("DEL", tg.key)
			if i < held {
				m.run("SET", tg.key, "someone", "PX", "10000")
			}
		}
		start := l.env.now() // the in-memory clock stands still during a round
		free, expires := l.probe(t.Context(), tg, nil)
		if want := held < 2; free != want {
			t.Errorf("probe with the key on %d of 3 masters: free %v, want %v", held, free, want)
		}
		want := start // a majority without the key: expired at their replies
		if held >= 2 {
			want = start.Add(10*time.Second + time.Millisecond + l.opts.DriftConstant)
		}
		// The replies' latency on the in-memory masters is a nanosecond.
		if d := expires.Sub(want); d < 0 || d > time.Microsecond {
			t.Errorf("probe with the key on %d of 3 masters: expires %v after the probe began, want %v", held, expires.Sub(start), want.Sub(start))
		}
	}
}

// roundError is a failed round's error whose first n of its masters had
// outcome first and the others rest.
func roundError(n, of int, first, rest quorum.Outcome) error {
	e := &Error{Masters: make([]MasterResult, of)}
	for i := range e.Masters {
		e.Masters[i].Outcome = rest
		if i < n {
			e.Masters[i].Outcome = first
		}
	}
	return e
}

// grantedSomewhere: some master granted the failed round.
func TestMutateGrantedSomewhere(t *testing.T) {
	for ok := range 3 {
		if got := grantedSomewhere(roundError(ok, 3, quorum.OK, quorum.Refused)); got != (ok > 0) {
			t.Errorf("grantedSomewhere with %d of 3 granting = %v", ok, got)
		}
	}
	if grantedSomewhere(nil) {
		t.Error("grantedSomewhere(nil) = true")
	}
}

// grantWaiter is a waiter of l for tg that a release may hand the key to,
// with grant token token, whose first join was at now: its grants count
// from then (docs/design.md §14.3).
func grantWaiter(l *Locker, tg target, token string) *waiter {
	x := &waiter{ch: make(chan struct{}, 1), keys: []string{tg.key}, id: l.wake.id + ".1"}
	l.wake.mu.Lock()
	l.wake.queues[tg.key] = &waitQueue{waiters: []*waiter{x}}
	l.wake.mu.Unlock()
	x.grant = &grantState{token: token, digest: tokenDigest(token), ttl: uint64(l.opts.TTL.Milliseconds()), by: make([]bool, len(l.streams))}
	l.wake.member(x, true, l.env.now())
	return x
}

// probe of a grant waiter reads, with the PTTL, whether each master holds
// its grant token, and counts those masters as its grants; complete then
// asks, with SET NX of its token, only the masters that have not handed it
// the key, for the grants still missing; a handed lock has validity left,
// or is refused.
func TestMutateGrantWaiter(t *testing.T) {
	l, ms, clk := simDriverLocker(t, 3, &Options{TTL: time.Second, DriftFactor: 0.01, DriftConstant: 2 * time.Millisecond})
	tg, err := l.target("g")
	if err != nil {
		t.Fatal(err)
	}
	x := grantWaiter(l, tg, "G")
	ms[0].run("SET", tg.key, "G", "PX", "1000")
	ms[2].run("SET", tg.key, "other", "PX", "1000")
	free, _ := l.probe(t.Context(), tg, x)
	flush(l)
	if !free {
		t.Error("probe with the key another's on 1 of 3 masters: not free")
	}
	if _, _, by := l.wake.grantSoFar(x); !slices.Equal(by, []bool{true, false, false}) {
		t.Fatalf("probe counted grants %v, want master 0's (the one holding the grant token)", by)
	}
	log := spy(ms)
	l.complete(t.Context(), tg, x)
	flush(l)
	if n := log.count(0, func([]string) bool { return true }); n != 0 {
		t.Errorf("complete sent %d commands to master 0, which had handed the key already", n)
	}
	if got := ms[1].run("GET", tg.key).Text; got != "G" {
		t.Errorf("complete left master 1's free key %q, want the grant token", got)
	}
	if got := ms[2].run("GET", tg.key).Text; got != "other" {
		t.Errorf("complete changed master 2's key, another's, to %q", got)
	}
	start, by, ok := l.wake.grantedSince(x)
	if !ok || !slices.Equal(by, []bool{true, true, false}) {
		t.Fatalf("after complete: granted by %v (%v), want masters 0 and 1", by, ok)
	}
	// Nothing missing: complete sends nothing.
	before := log.total()
	l.complete(t.Context(), tg, x)
	flush(l)
	if n := log.total() - before; n != 0 {
		t.Errorf("complete with a majority of grants sent %d commands", n)
	}
	// Validity counts from the first join: 1 s − 12 ms of drift is the
	// window; with all of it gone the handed lock is refused, and 1 ms
	// before it is taken.
	budget := l.opts.budget()
	clk.pass(budget.Window() - time.Millisecond - l.env.now().Sub(start))
	if lk := l.fromGrants(t.Context(), tg, x, l.opts.TTL, budget); lk == nil {
		t.Fatal("a handed lock with 1 ms of validity left was refused")
	}
	clk.pass(time.Millisecond)
	if lk := l.fromGrants(t.Context(), tg, x, l.opts.TTL, budget); lk != nil {
		t.Errorf("a handed lock with no validity left was taken: %v", lk.Acquisition().Validity)
	}
}

// rank is the waiter's place on a majority of the masters that answered:
// the need-th lowest of their ZRANK + 1; a master that refused the command
// is not counted.
func TestMutateRank(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, nil)
	tg, err := l.target("k")
	if err != nil {
		t.Fatal(err)
	}
	x := &waiter{ch: make(chan struct{}, 1), keys: []string{tg.key}, id: "me.1"}
	q := tg.key + queueSuffix
	ms[0].run("ZADD", q, "1", "a", "2", "me.1")
	ms[1].run("ZADD", q, "1", "me.1")
	ms[2].run("ZADD", q, "1", "a", "2", "b", "3", "c", "4", "me.1")
	ms[2].refuseWith("", func(args []string) bool { return args[0] == "ZRANK" })
	if got := l.rank(t.Context(), tg, x); got != 2 {
		t.Errorf("rank at places 2 and 1 (and a master refusing) = %d, want 2", got)
	}
}

// A queue round sends the waiter's member life, or the member life of
// the Locker's TTL where the waiter has none: never a PEXPIRE of 0,
// which would delete the queue.
func TestMutateJoinLife(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 3, &Options{TTL: 10 * time.Second})
	tg, err := l.target("j")
	if err != nil {
		t.Fatal(err)
	}
	q := tg.key + queueSuffix
	for _, life := range []uint64{0, 5000} {
		x := &waiter{ch: make(chan struct{}, 1), keys: []string{tg.key}, id: "j.1", life: life, began: l.env.now()}
		l.queueRound(t.Context(), tg, x, cmdJoin)
		flush(l)
		want := int64(life)
		if life == 0 {
			want = l.memberLife(l.opts.TTL).Milliseconds()
		}
		for i, m := range ms {
			if got := m.run("PTTL", q).Int; got != want {
				t.Errorf("waiter life %d ms: master %d's queue lives %d ms, want %d", life, i, got, want)
			}
		}
		ms[0].run("DEL", q)
		ms[1].run("DEL", q)
		ms[2].run("DEL", q)
	}
}
