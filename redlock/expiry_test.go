package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// pttlRead is one master's PTTL of a key (ms; −2 when absent), with the
// instants the read was sent and its reply came.
type pttlRead struct {
	ms         int64
	sent, came time.Time
}

func readPTTL(t *testing.T, c *lab.Masters, key string) []pttlRead {
	t.Helper()
	out := make([]pttlRead, c.N())
	for i := range c.N() {
		sent := time.Now()
		d, err := c.Client(i).PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("PTTL on master %d: %v", i, err)
		}
		out[i] = pttlRead{ms: d.Milliseconds(), sent: sent, came: time.Now()}
		if d < 0 { // go-redis gives −1 and −2 in ns as they are
			out[i].ms = int64(d)
		}
	}
	return out
}

// A holder that dies (its Locker closed without Unlock: nothing released,
// nothing announced) leaves keys that expire; a waiter whose backoff is
// 5–10 s acquires at their expiry, not on its timer, having read their
// PTTLs when its round failed (docs/design.md §14.2).
// On each master the waiter's key landed after the holder's expired
// there. Both a waiter in the masters' queue and one that is not
// (RedsyncKeys: no queue).
func TestWaiterAcquiresWhenDeadHoldersKeysExpire(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redlock.Options
		key  string
	}{
		{"queued", redlock.Options{}, "redlock:{dead-holder}"},
		{"not queued", redlock.Options{RedsyncKeys: true}, "dead-holder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lab.ForTest(t, 5, nil)
			ctx := t.Context()
			hopts := tc.opts
			holder := newLocker(t, c, &hopts)
			// Long enough that the holder's keys are still there when
			// the test and the waiter read them, on a loaded machine.
			const ttl = 1500 * time.Millisecond
			dead, err := holder.TryLock(ctx, "dead-holder", redlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			holder.Close() // crashed: the keys stay until their TTL
			wopts := tc.opts
			// The waiter's timer starts after the test's read, at most
			// ttl before expiredOnAll, so an acquisition on the timer
			// comes at least 5s − ttl = 3.5s after expiredOnAll; the
			// bound below (2s) leaves a wake at the expiry room for the
			// timers and rounds of -race on two loaded cores (measured:
			// a timer 330ms late).
			wopts.Retry = redlock.RetryPolicy{MinDelay: 10 * time.Second, MaxDelay: 10 * time.Second}
			waiter := newLocker(t, c, &wopts)
			expiry := readPTTL(t, c, tc.key) // the holder's keys, before the waiter's round
			var expiredOnAll time.Time       // no master holds the key after this
			for i, r := range expiry {
				if r.ms < 0 {
					t.Fatalf("master %d: the holder's key is gone already (PTTL %d): the test is too slow for its TTL", i, r.ms)
				}
				expiredOnAll = later(expiredOnAll, r.came.Add(time.Duration(r.ms+1)*time.Millisecond))
			}
			lk, err := waiter.Lock(ctx, "dead-holder", redlock.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Unlock(context.WithoutCancel(ctx))
			a := lk.Acquisition()
			decided := a.Start.Add(a.Elapsed)
			if after := decided.Sub(expiredOnAll); after > 2*time.Second {
				t.Errorf("acquired %v after the dead holder's keys had expired on every master, want < 2s (the backoff is 5–10s: not woken at the expiry)", after)
			} else {
				t.Logf("acquired %v after the dead holder's keys had expired on every master", after)
			}
			// On each master that holds the waiter's token, its SET came
			// after the holder's key there expired: the latest instant the
			// SET can have run (its PTTL read back) is not before the
			// earliest instant the holder's key can have expired.
			// The waiter acquires once a majority has expired, which may
			// be before the last master's key has: the masters are read
			// once every one of the holder's keys has expired, so that a
			// dead token still there is one that outlived its TTL.
			time.Sleep(time.Until(expiredOnAll))
			now := readPTTL(t, c, tc.key)
			vals := keyValues(t, c, tc.key)
			held := 0
			for i, v := range vals {
				switch v {
				case dead.Token():
					t.Errorf("master %d still holds the dead holder's token", i)
				case lk.Token():
					held++
					setBy := now[i].came.Add(-(10*time.Second - time.Duration(now[i].ms+1)*time.Millisecond))
					expiredFrom := expiry[i].sent.Add(time.Duration(expiry[i].ms) * time.Millisecond)
					if setBy.Before(expiredFrom) {
						t.Errorf("master %d: the waiter's key was set by %v, before the holder's expired there (from %v)", i, setBy.Format(time.StampMicro), expiredFrom.Format(time.StampMicro))
					}
				}
			}
			if held < 3 {
				t.Errorf("the waiter's token is on %d masters, want a majority (3): %q", held, vals)
			}
		})
	}
}

// expireBeforeRead is a master on the client path on which the holder's
// key expires between a waiter's round and its read of the PTTL: the
// first PTTL of key it is sent deletes key first (without announcing, as
// an expiry does not).
type expireBeforeRead struct {
	driver.Master
	c    *redis.Client
	key  string
	once sync.Once
}

func (m *expireBeforeRead) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	for _, cmd := range cmds {
		if len(cmd) == 2 && strings.EqualFold(cmd[0], "PTTL") && cmd[1] == m.key {
			m.once.Do(func() { m.c.Del(ctx, m.key) })
		}
	}
	return m.Master.Do(ctx, cmds)
}

// The dead holder's keys expire after the waiter's round found them held
// and before its read of their PTTLs (a window that a loaded machine
// widens): the read, which finds them gone from a majority, dates their
// expiry in the past, and the waiter looks again MasterTimeout later (the
// read cannot tell an expiry from a release that named another waiter),
// not at its backoff (an hour here). Both in the masters' queue and not.
func TestWaiterAcquiresWhenKeysExpireBeforeItsRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redlock.Options
		key  string
	}{
		{"queued", redlock.Options{}, "redlock:{gone-before-read}"},
		{"not queued", redlock.Options{RedsyncKeys: true}, "gone-before-read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lab.ForTest(t, 5, nil)
			hopts := tc.opts
			holder := newLocker(t, c, &hopts)
			if _, err := holder.TryLock(t.Context(), "gone-before-read"); err != nil {
				t.Fatal(err)
			}
			holder.Close() // crashed: nothing released, nothing announced
			ms := make([]driver.Master, c.N())
			for i := range ms {
				ms[i] = &expireBeforeRead{Master: redlock.GoRedisMaster(c.Client(i)), c: c.Client(i), key: tc.key}
			}
			wopts := tc.opts
			wopts.MasterTimeout = 200 * time.Millisecond
			wopts.Retry = redlock.RetryPolicy{MinDelay: time.Hour, MaxDelay: time.Hour}
			waiter, err := redlock.NewMasters(ms, &wopts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { waiter.Close() })
			// Not a bound on speed: anything but a wake at the read
			// waits an hour.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			lk, err := waiter.Lock(ctx, "gone-before-read")
			if err != nil {
				t.Fatalf("the waiter was not woken when its read found the keys expired: %v", err)
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A live holder whose keeper extends its lock: a waiter woken at each
// expiry the PTTLs announced finds the key extended and waits again,
// without a round more than its reads call for; it acquires when the
// holder releases.
func TestWaiterWokenAtExpiryOfAnExtendedLockWaitsAgain(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	holder := newLocker(t, c, &redlock.Options{TTL: 300 * time.Millisecond, MasterTimeout: 100 * time.Millisecond})
	h, err := redlock.Hold(holder, ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	waiter := newLocker(t, c, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 3 * time.Second, MaxDelay: 3 * time.Second}})
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, "kept")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	queued(t, c, "redlock:{kept}", 1)
	before := setCalls(t, c)
	// Not waiting for a state: letting about 5 extensions happen, each
	// moving the expiry the waiter's last read announced.
	time.Sleep(time.Second)
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was kept: %v", err)
	default:
	}
	for m, a := range setCalls(t, c) {
		// The reads (PTTL) see the extended key: no SET is sent. A round
		// at a wake whose expiry a keeper moved would be one SET a wake.
		if d := a - before[m]; d != 0 {
			t.Errorf("master %d executed %d SETs while the holder kept its lock, want 0", m, d)
		}
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired(t, got)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// keyValues returns key's value on each master ("" when absent).
func keyValues(t *testing.T, c *lab.Masters, key string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range c.N() {
		out[i] = c.Client(i).Get(t.Context(), key).Val()
	}
	return out
}
