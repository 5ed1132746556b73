package redlock

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// A waiter's wait for a holder's keys to expire (docs/design.md §14.2),
// in a memWorld: the keys expire on the masters' clock, which the test
// moves by firing the waiter's timer. expiry_test.go keeps the check on
// real masters of a waiter beside a keeper's extensions.

// A holder that dies (its Locker closed without Unlock: nothing released,
// nothing announced) leaves keys that expire; a waiter whose backoff is
// 10 s acquires at their expiry, not on its timer, having read their
// PTTLs when its round failed. Every master holds the waiter's token, set
// after the holder's key expired there. Both a waiter in the masters'
// queue and one that is not (RedsyncKeys: no queue).
func TestWaiterAcquiresWhenDeadHoldersKeysExpire(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		key  string
	}{
		{"queued", Options{}, "redlock:{dead-holder}"},
		{"not queued", Options{RedsyncKeys: true}, "dead-holder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newMemWorld(t, 5)
			ctx := t.Context()
			hopts := tc.opts
			holder, _ := w.locker(&hopts)
			const ttl = 1500 * time.Millisecond
			dead, err := holder.TryLock(ctx, "dead-holder", WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			w.flush()
			set := w.clk.now() // the holder's keys expire once the clock is past set + ttl
			holder.Close()     // crashed: the keys stay until their TTL
			wopts := tc.opts
			wopts.Retry = RetryPolicy{MinDelay: 10 * time.Second, MaxDelay: 10 * time.Second}
			waiter, _ := w.locker(&wopts)
			w.advance(100 * time.Millisecond) // the waiter comes a little later
			got := lockIn(ctx, waiter, "dead-holder")
			w.sleeping(1)
			if d := w.delays(); d[0] >= 10*time.Second {
				t.Fatalf("the waiter sleeps %v, its backoff: it did not read the holder's expiry", d[0])
			}
			w.until("the waiter's acquisition", one, 10, func() bool { return len(got) > 0 })
			lk := lockOf(t, got, "the waiter")
			defer lk.Unlock(context.WithoutCancel(ctx))
			a := lk.Acquisition()
			decided := a.Start.Add(a.Elapsed).Sub(w.clk.base)
			expired := set + ttl
			if after := decided - expired; after < 0 || after > 2*time.Second {
				t.Errorf("acquired %v after the dead holder's keys had expired on every master, want within [0, 2s] (the backoff is 10s: not woken at the expiry)", after)
			} else {
				t.Logf("acquired %v after the dead holder's keys had expired on every master", after)
			}
			w.flush()
			for i, v := range w.get(tc.key) {
				switch v {
				case dead.Token():
					t.Errorf("master %d still holds the dead holder's token", i)
				case lk.Token():
					// Set at decided at the latest, after the holder's
					// key expired there: PTTL 10s less what has passed.
					if left := time.Duration(w.run(i, "PTTL", tc.key).Int) * time.Millisecond; left > 10*time.Second-(w.clk.now()-decided) {
						t.Errorf("master %d: the waiter's key has %v left, set after the acquisition", i, left)
					}
				default:
					t.Errorf("master %d holds %q, want the waiter's token (every master's key had expired)", i, v)
				}
			}
		})
	}
}

// The dead holder's keys expire after the waiter's round found them held
// and before its read of their PTTLs: the read, which finds them gone from
// a majority, dates their expiry in the past, and the waiter looks again
// MasterTimeout later (the read cannot tell an expiry from a release that
// named another waiter), not at its backoff (an hour here). Both in the
// masters' queue and not.
func TestWaiterAcquiresWhenKeysExpireBeforeItsRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		key  string
	}{
		{"queued", Options{}, "redlock:{gone-before-read}"},
		{"not queued", Options{RedsyncKeys: true}, "gone-before-read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newMemWorld(t, 5)
			hopts := tc.opts
			holder, _ := w.locker(&hopts)
			if _, err := holder.TryLock(t.Context(), "gone-before-read"); err != nil {
				t.Fatal(err)
			}
			holder.Close() // crashed: nothing released, nothing announced
			wopts := tc.opts
			wopts.MasterTimeout = 200 * time.Millisecond
			wopts.Retry = RetryPolicy{MinDelay: time.Hour, MaxDelay: time.Hour}
			waiter, conns := w.locker(&wopts)
			for _, c := range conns {
				var once sync.Once
				c.mu.Lock()
				c.before = func(m *sim.Master, now time.Duration, args []string) {
					if len(args) == 2 && strings.EqualFold(args[0], "PTTL") && args[1] == tc.key {
						once.Do(func() { m.Do(now, []string{"DEL", tc.key}) }) // expires, unannounced
					}
				}
				c.mu.Unlock()
			}
			start := w.clk.now()
			got := lockThenUnlockIn(t.Context(), waiter, "gone-before-read")
			w.until("the waiter's acquisition", one, 10, func() bool { return len(got) > 0 })
			if err := doneOf(t, got, "the waiter"); err != nil {
				t.Fatal(err)
			}
			if d := w.clk.now() - start; d >= time.Hour {
				t.Errorf("the waiter acquired %v after it began: at its backoff, not woken when its read found the keys expired", d)
			}
		})
	}
}
