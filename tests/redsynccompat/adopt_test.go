package redsynccompat_test

import (
	"errors"
	"testing"

	"github.com/go-redsync/redsync/v4"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The migration guide's mapping of WithValue: a lock taken by redsync is
// taken over by its Value with Adopt (RedsyncKeys), without a fence (a
// fenced Locker says why it cannot recover one); the adopted lock extends
// and unlocks redsync's key.
func TestAdoptRedsyncMutexByValue(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	m := newRedsync(t, c).NewMutex("orders:adopt", redsync.WithExpiry(ttl))
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	fenced := newLocker(t, c, redlock.Options{RedsyncKeys: true, Fencing: true})
	if _, err := fenced.Adopt(ctx, "orders:adopt", m.Value()); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("fenced Adopt of a redsync mutex: %v, want ErrNotAcquired (no fence to recover)", err)
	}
	l := newLocker(t, c, redlock.Options{RedsyncKeys: true})
	lk, err := l.Adopt(ctx, "orders:adopt", m.Value())
	if err != nil {
		t.Fatal(err)
	}
	if lk.Token() != m.Value() || lk.Deadline().After(m.Until()) {
		t.Fatalf("adopted: token %q (redsync's %q), deadline %v after redsync's Until", lk.Token(), m.Value(), lk.Deadline().Sub(m.Until()))
	}
	if err := lk.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	onEveryMaster(t, c, "orders:adopt", m.Value())
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := valuesOf(t, c, "orders:adopt"); !allEqual(v, "") {
		t.Fatalf("key after the adopted lock's Unlock: %q", v)
	}
}
