package redlock

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A give-back draws a new grant token (docs/design.md §14.3 item 5): grants
// of the token given back no longer count, whichever master announces
// them, and a poll that reads the new token counts only after a join has
// carried it. The give-back itself may run late on a master (parked, or
// sent again after NOSCRIPT), so counting must not rest on its order: it
// cannot delete a key handed to the new token, and nothing of the old one
// counts. A handed lock's validity counts from the first join that
// carried its token, however many joins carried it since.
func TestGivenBackGrantsDoNotCount(t *testing.T) {
	l := &Locker{need: 3, masters: make([]redis.UniversalClient, 5), env: sysEnv{}}
	w := newWaker(l.env, l.masters, l.given, l.need)
	const key = "redlock:{r}"
	x := &waiter{ch: make(chan struct{}, 1), keys: []string{key}, id: w.id + ".1"}
	w.queues[key] = &waitQueue{waiters: []*waiter{x}}
	x.grant = &grantState{token: "A", digest: tokenDigest("A"), ttl: 1000, by: make([]bool, 5)}
	grant := func(i int, token string) {
		w.released(i, key, tokenDigest(token)+" "+x.id+" +")
	}
	t0 := time.Now()
	if m := w.member(x, true, t0); m != x.id+" 1000 A" {
		t.Fatalf("queue member %q, want %q", m, x.id+" 1000 A")
	}
	grant(0, "A")
	grant(1, "A")
	grant(1, "A") // a master's grant counts once
	if n := w.grants(x); n != 2 {
		t.Fatalf("%d grants counted, want 2", n)
	}
	if old := w.resetGrants(x, "B"); old != x.id+" 1000 A" {
		t.Fatalf("gave back member %q, want %q", old, x.id+" 1000 A")
	}
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted after the give-back, want 0", n)
	}
	w.countGrant(x, 4, "B") // no join has carried B yet: nothing of B can be on a master
	w.countGrant(x, 4, "A") // a poll of the token given back
	grant(2, "A")
	grant(3, "B") // before any join of B
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted (a poll before any join of B, a grant of A, a grant of B before its join), want 0", n)
	}
	t1 := t0.Add(time.Second)
	if m := w.member(x, true, t1); m != x.id+" 1000 B" {
		t.Fatalf("queue member %q, want %q", m, x.id+" 1000 B")
	}
	if !w.needsNewToken(x, t1.Add(125*time.Millisecond+time.Microsecond)) || w.needsNewToken(x, t1.Add(125*time.Millisecond)) {
		t.Fatalf("needsNewToken: want true only past an eighth of the TTL (125ms) after B's first join")
	}
	w.member(x, true, t1.Add(time.Second)) // a later join of B: validity still counts from the first
	grant(0, "A")                          // the old token
	grant(1, "B")
	w.countGrant(x, 2, "B") // a poll that read B
	grant(3, "B")
	start, by, ok := w.grantedSince(x)
	if !ok || !start.Equal(t1) {
		t.Fatalf("grantedSince = %v, %v, %v; want a majority from %v (B's first join)", start, by, ok, t1)
	}
	if want := []bool{false, true, true, true, false}; !slices.Equal(by, want) {
		t.Fatalf("granted by %v, want %v", by, want)
	}
	// No token could be drawn: nothing counts any more.
	w.resetGrants(x, "")
	w.member(x, true, t1)
	grant(0, "B")
	w.countGrant(x, 1, "B")
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted with counting off, want 0", n)
	}
	if w.needsNewToken(x, t1.Add(time.Hour)) {
		t.Fatalf("needsNewToken with counting off: a join would give back for nothing")
	}
}

// No lock is handed out from the masters' grants once Close has begun: a
// waiter that a majority of masters handed the key takes it from them
// while the Locker is open (fromGrants returns the lock), and not once the
// Locker is closing (nil: the wait ends with ErrClosed and gives the keys
// back, TestCloseGivesBackGrants).
func TestNoHandedLockOnceClosing(t *testing.T) {
	opts := Options{}.withDefaults()
	l := &Locker{need: 3, masters: make([]redis.UniversalClient, 5), addrs: make([]string, 5), opts: opts, env: sysEnv{},
		log: slog.New(slog.DiscardHandler)}
	w := newWaker(l.env, l.masters, l.given, l.need)
	l.wake = w
	const key = "redlock:{r}"
	tg := target{resource: "r", key: key}
	handed := func(id string) *waiter {
		x := &waiter{ch: make(chan struct{}, 1), keys: []string{key}, id: w.id + "." + id}
		w.queues[key] = &waitQueue{waiters: []*waiter{x}}
		x.grant = &grantState{token: "T" + id, digest: tokenDigest("T" + id), ttl: uint64(opts.TTL.Milliseconds()), by: make([]bool, 5)}
		w.member(x, true, time.Now())
		for i := range 3 {
			w.released(i, key, tokenDigest("T"+id)+" "+x.id+" +")
		}
		return x
	}
	if lk := l.fromGrants(t.Context(), tg, handed("1"), opts.TTL, opts.budget()); lk == nil || lk.Token() != "T1" {
		t.Fatalf("open Locker: fromGrants %v, want the lock handed to T1", lk)
	}
	l.closing = true
	if lk := l.fromGrants(t.Context(), tg, handed("2"), opts.TTL, opts.budget()); lk != nil {
		t.Fatalf("closing Locker: fromGrants handed out %v", lk.Token())
	}
}
