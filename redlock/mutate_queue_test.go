package redlock

import (
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

	// queueLife: only a release that may hand the key itself (pop 2).
	l.opts.TTL = 10 * time.Second
	for pop, want := range map[uint64]uint64{0: 0, 1: 0, 2: 10_000, 3: 10_000} {
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
