package redlocktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// Rules whose mutants lived through make mutate's fast set for package
// redlock (docs/decisions/2026-12-06-mutation-testing.md). They run here,
// on in-process masters, and not in package redlock's own tests: there,
// an import of redlocktest would put miniredis in the go.sum of every
// module importing redlock (scripts/check-consumer-deps.sh).

// The election's argument rules: a value of up to 64 KiB is published,
// one byte more is refused as invalid, by Campaign and by Proclaim alike;
// Proclaim and Resign by an Election that does not lead fail as ErrLost
// and ErrUnlocked, and a leader's Proclaim succeeds; a reading of the
// leader from exactly a majority of masters names it.
func TestElectionArgumentRules(t *testing.T) {
	masters := redlocktest.New(t, nil)
	// Long enough that a loaded machine (the race detector, 2 CPUs) never
	// times a master out: nothing here is about time.
	l, err := masters.Locker(&redlock.Options{Fencing: true, TTL: time.Minute, MasterTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Election("mutate-args")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	limit := strings.Repeat("v", 64<<10)
	if err := e.Proclaim(ctx, "before"); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Proclaim before leading: %v, want ErrLost", err)
	}
	if err := e.Resign(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Fatalf("Resign before leading: %v, want ErrUnlocked", err)
	}
	if _, err := e.Campaign(ctx, limit+"v"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Campaign with a value of 64 KiB + 1: %v, want ErrInvalid", err)
	}
	lead, err := e.Campaign(ctx, limit)
	if err != nil {
		t.Fatalf("Campaign with a value of 64 KiB: %v", err)
	}
	if lead.Fence() == 0 {
		t.Fatal("a leadership without a term")
	}
	if _, err := e.Campaign(ctx, "again"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Campaign while leading: %v, want ErrInvalid", err)
	}
	if err := e.Proclaim(ctx, limit+"v"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Proclaim of 64 KiB + 1: %v, want ErrInvalid", err)
	}
	if err := e.Proclaim(ctx, limit); err != nil {
		t.Fatalf("Proclaim of 64 KiB by the leader: %v", err)
	}
	if err := e.Proclaim(ctx, "next"); err != nil {
		t.Fatalf("Proclaim by the leader: %v", err)
	}
	got, err := e.Leader(ctx)
	if err != nil || got.Value != "next" || got.Term != lead.Fence() {
		t.Fatalf("Leader: %+v, %v; want value %q, term %d", got, err, "next", lead.Fence())
	}
	// Two masters refuse every connection: the three left, exactly a
	// majority, still name the leader.
	if err := masters.Refuse(3, 4); err != nil {
		t.Fatal(err)
	}
	got, err = e.Leader(ctx)
	if err != nil || got.Value != "next" || got.Term != lead.Fence() {
		t.Fatalf("Leader read on a bare majority: %+v, %v; want value %q, term %d", got, err, "next", lead.Fence())
	}
	if err := masters.Heal(3, 4); err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := e.Proclaim(ctx, "after"); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Proclaim after Resign: %v, want ErrLost", err)
	}
	if err := e.Resign(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Fatalf("Resign twice: %v, want ErrUnlocked", err)
	}
	var nilCtx context.Context
	if err := e.Proclaim(nilCtx, "x"); err == nil {
		t.Fatal("Proclaim with a nil context succeeded")
	}
}

// With no leader, Leader says why: no majority reports one when every
// master answered, and fewer than a majority answered when three of five
// refuse.
func TestNoLeaderSaysWhy(t *testing.T) {
	masters := redlocktest.New(t, nil)
	l, err := masters.Locker(&redlock.Options{Fencing: true, TTL: time.Minute, MasterTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Election("mutate-none")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		refuse []int
		reason string
	}{
		{nil, "no leader is reported by a majority of masters"},
		{[]int{3, 4}, "no leader is reported by a majority of masters"},
		{[]int{2, 3, 4}, "fewer than a majority of masters answered"},
	} {
		if err := masters.Heal(0, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		if len(c.refuse) > 0 {
			if err := masters.Refuse(c.refuse...); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.Leader(t.Context())
		if !errors.Is(err, redlock.ErrNoLeader) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("Leader with masters %v refusing: %v, want ErrNoLeader saying %q", c.refuse, err, c.reason)
		}
	}
	if err := masters.Heal(0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
}
