package redlocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// Extend moves the deadline: a lock of 1 minute extended to 2 minutes
// has a deadline at least 30 s later, and its keys stand on every master;
// an Extend with a nil context fails and sends nothing. (Mutants that
// made Extend return nil without extending, or refuse every context, lived
// through make mutate's fast set: the simulator's holders call the
// unexported extend.)
func TestExtendMovesTheDeadline(t *testing.T) {
	masters := redlocktest.New(t, nil)
	l, err := masters.Locker(&redlock.Options{TTL: time.Minute, MasterTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	lk, err := l.TryLock(ctx, "mutate-extend")
	if err != nil {
		t.Fatal(err)
	}
	before := lk.Deadline()
	var nilCtx context.Context
	if err := lk.Extend(nilCtx); err == nil {
		t.Fatal("Extend with a nil context succeeded")
	}
	if !lk.Deadline().Equal(before) {
		t.Fatalf("a refused Extend moved the deadline from %v to %v", before, lk.Deadline())
	}
	if err := lk.Extend(ctx, redlock.WithTTL(2*time.Minute)); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if after := lk.Deadline(); after.Before(before.Add(30 * time.Second)) {
		t.Fatalf("Extend to 2 minutes moved the deadline from %v to %v: want at least 30 s later", before, after)
	}
	if n := masters.Holding(l, lk); n != masters.N() {
		t.Fatalf("the extended lock stands on %d of %d masters", n, masters.N())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
