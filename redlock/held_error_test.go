package redlock_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// A key held by another Locker on every master reads "held" from the
// error 50 of 50 times, whatever N: with an even N the round is decided
// at the first refusals that make a majority impossible, before the
// others answer. A failure the refusals alone did not cause is not held.
func TestHeldByAnotherWhateverN(t *testing.T) {
	for _, n := range []int{4, 5} {
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) {
			c := lab.ForTest(t, n, nil)
			holder := newLocker(t, c, nil)
			other := newLocker(t, c, nil)
			ctx := t.Context()
			lk, err := holder.TryLock(ctx, "taken")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the token on every master", func() bool { return countValue(keyState(t, c, "taken"), lk.Token()) == n })
			held := 0
			for range 50 {
				_, err := other.TryLock(ctx, "taken")
				if !errors.Is(err, redlock.ErrNotAcquired) {
					t.Fatalf("TryLock of a held key: %v, want ErrNotAcquired", err)
				}
				if errors.Is(err, redlock.ErrHeld) {
					held++
				} else {
					t.Logf("not reported held: %v", err)
				}
			}
			if held != 50 {
				t.Errorf("%d of 50 tries reported held, want 50", held)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			// One refusal, and the rest of the impossibility from stalled
			// masters: not held.
			if err := c.Client(0).Set(ctx, "redlock:{mixed}", "another-owner", 0).Err(); err != nil {
				t.Fatal(err)
			}
			need := n/2 + 1
			for i := 1; i <= n-need; i++ {
				if err := c.Pause(i); err != nil {
					t.Fatal(err)
				}
			}
			_, err = other.TryLock(ctx, "mixed")
			if !errors.Is(err, redlock.ErrNotAcquired) || errors.Is(err, redlock.ErrHeld) {
				t.Errorf("1 refusal and %d stalled of %d: %v; want ErrNotAcquired, not ErrHeld", n-need, n, err)
			}
			c.ResumeAll()
		})
	}
}
