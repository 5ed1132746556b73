package redlock

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A give-back draws a new grant token (docs/design.md §14.3 item 5): grants
// of the token given back no longer count, whichever master announces
// them and whatever join they name, and neither do grants of the new token
// that name a join from before the give-back; a poll that reads the new
// token counts only after a join has carried it. The give-back itself may
// run late on a master (parked, or sent again after NOSCRIPT), so counting
// must not rest on its order: it cannot delete a key handed to the new
// token, and nothing of the old one counts.
func TestGivenBackGrantsDoNotCount(t *testing.T) {
	l := &Locker{need: 3, masters: make([]redis.UniversalClient, 5)}
	w := newWaker(l)
	const key = "redlock:{r}"
	x := &waiter{ch: make(chan struct{}, 1), keys: []string{key}, id: w.id + ".1"}
	w.queues[key] = &waitQueue{waiters: []*waiter{x}}
	x.grant = &grantState{token: "A", digest: tokenDigest("A"), ttl: 1000, seq: make([]uint64, 5)}
	grant := func(i int, token string, join int) {
		w.released(i, key, tokenDigest(token)+" "+x.id+" "+strconv.Itoa(join))
	}
	t0 := time.Now()
	if rec := w.joinGrant(x, t0); rec != "1 1000 A" {
		t.Fatalf("join record %q, want %q", rec, "1 1000 A")
	}
	grant(0, "A", 1)
	grant(1, "A", 1)
	if n := w.grants(x); n != 2 {
		t.Fatalf("%d grants counted, want 2", n)
	}
	if old := w.resetGrants(x, "B", true); old != "A" {
		t.Fatalf("gave back %q, want A", old)
	}
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted after the give-back, want 0", n)
	}
	w.mine(x, 4, "B") // no join has carried B yet: nothing of B can be on a master
	w.mine(x, 4, "A") // a poll of the token given back
	grant(2, "A", 1)
	grant(3, "B", 1) // names a join from before the give-back
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted (a poll before any join of B, a grant of A, a grant naming an old join), want 0", n)
	}
	t1 := t0.Add(time.Second)
	if rec := w.joinGrant(x, t1); rec != "2 1000 B" {
		t.Fatalf("join record %q, want %q", rec, "2 1000 B")
	}
	grant(0, "A", 2) // the old token, even naming the new join
	grant(1, "B", 2)
	w.mine(x, 2, "B") // a poll that read B: counted as following join 2
	grant(3, "B", 2)
	start, by, ok := w.grantedSince(x)
	if !ok || !start.Equal(t1) {
		t.Fatalf("grantedSince = %v, %v, %v; want a majority from %v (join 2's send)", start, by, ok, t1)
	}
	if want := []bool{false, true, true, true, false}; !slices.Equal(by, want) {
		t.Fatalf("granted by %v, want %v", by, want)
	}
	// No token could be drawn: nothing counts any more.
	w.resetGrants(x, "", true)
	w.joinGrant(x, t1)
	grant(0, "B", 3)
	w.mine(x, 1, "B")
	if n := w.grants(x); n != 0 {
		t.Fatalf("%d grants counted with counting off, want 0", n)
	}
}
