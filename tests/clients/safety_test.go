package clients_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/lab/labtest"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eachKind runs test once per kind, on the same five masters (each kind
// locks its own resources).
func eachKind(t *testing.T, c *lab.Masters, test func(t *testing.T, k kind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Cleanup(c.ResumeAll)
			test(t, k)
		})
	}
}

// newLocker is a Locker over k's masters of c, with a generous MasterTimeout
// where opts has none (two loaded cores under -race), warmed up by one
// round so that the first dial is not what a test measures.
func newLocker(t *testing.T, c *lab.Masters, k kind, opts redlock.Options) *redlock.Locker {
	t.Helper()
	if opts.MasterTimeout == 0 {
		opts.MasterTimeout = 200 * time.Millisecond
	}
	l, err := redlock.NewMasters(k.masters(t, c), &opts)
	if err != nil {
		t.Fatalf("NewMasters: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll) // before Close: a stalled master holds a batch
	labtest.Eventually(t, 10*time.Second, func() error {
		lk, err := l.TryLock(t.Context(), "warm-up:"+k.name)
		if err == nil {
			err = lk.Unlock(t.Context())
		}
		return err
	})
	return l
}

// value reads key on master i with the lab's admin client ("" when
// absent).
func value(t *testing.T, c *lab.Masters, i int, key string) string {
	t.Helper()
	v, err := c.Admin(i).Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s on master %d: %v", key, i, err)
	}
	return v
}

// values is value on every master (none may be paused).
func values(t *testing.T, c *lab.Masters, key string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range out {
		out[i] = value(t, c, i, key)
	}
	return out
}

func lockKey(resource string) string { return "redlock:{" + resource + "}" }

// holding counts the masters (of those given, or all) on which key holds
// want.
func holding(t *testing.T, c *lab.Masters, key, want string, masters ...int) int {
	t.Helper()
	if masters == nil {
		for i := range c.N() {
			masters = append(masters, i)
		}
	}
	n := 0
	for _, i := range masters {
		if v := value(t, c, i, key); v == want && v != "" {
			n++
		}
	}
	return n
}

func TestMutualExclusion(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		const lockers, perLocker = 4, 20
		var ls []*redlock.Locker
		for range lockers {
			ls = append(ls, newLocker(t, c, k, redlock.Options{}))
		}
		most, sections, errs := labtest.Sections(t.Context(), lockers, perLocker, 0, func(ctx context.Context, w int) (*redlock.Lock, error) {
			return ls[w].Lock(ctx, "mutex:"+k.name)
		})
		for _, err := range errs {
			t.Error(err)
		}
		if most != 1 {
			t.Fatalf("%d holders at once, want 1", most)
		}
		if sections != lockers*perLocker {
			t.Fatalf("%d critical sections, want %d", sections, lockers*perLocker)
		}
	})
}

// Two of five stalled (SIGSTOP): each round still succeeds, and costs at
// most about MasterTimeout: the first meets the stall, later ones the open
// breakers. The times are logged (-v) for docs/design.md §10.
func TestTwoStalled(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{MasterTimeout: 100 * time.Millisecond})
		nt := l.Options().MasterTimeout
		for _, i := range []int{1, 3} {
			if err := c.Pause(i); err != nil {
				t.Fatal(err)
			}
		}
		res := "stall:" + k.name
		for round := range 3 {
			start := time.Now()
			lk, err := l.TryLock(t.Context(), res)
			if err != nil {
				t.Fatalf("round %d: TryLock with 2 of 5 stalled: %v", round, err)
			}
			took := time.Since(start)
			if n := holding(t, c, lockKey(res), lk.Token(), 0, 2, 4); n != 3 {
				t.Fatalf("round %d: the token on %d masters, want 3 (0, 2, 4)", round, n)
			}
			start = time.Now()
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatalf("round %d: Unlock: %v", round, err)
			}
			unlockTook := time.Since(start)
			t.Logf("round %d: TryLock %v, Unlock %v (MasterTimeout %v)", round, took, unlockTook, nt)
			if took > 10*nt || unlockTook > 10*nt {
				t.Fatalf("round %d: TryLock %v, Unlock %v: over 10× MasterTimeout (%v)", round, took, unlockTook, nt)
			}
			for _, i := range []int{0, 2, 4} {
				if v := value(t, c, i, lockKey(res)); v != "" {
					t.Fatalf("round %d: master %d still holds %q after Unlock", round, i, v)
				}
			}
		}
	})
}

// Three of five stalled: the round fails with two OK and three timed out,
// and once the three wake, the SETs that land late are released too.
func TestThreeStalled(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{MasterTimeout: 100 * time.Millisecond})
		for _, i := range []int{0, 2, 4} {
			if err := c.Pause(i); err != nil {
				t.Fatal(err)
			}
		}
		res := "minority:" + k.name
		start := time.Now()
		_, err := l.TryLock(t.Context(), res)
		took := time.Since(start)
		t.Logf("TryLock failed after %v (MasterTimeout %v)", took, l.Options().MasterTimeout)
		if took > 10*l.Options().MasterTimeout {
			t.Fatalf("TryLock with 3 of 5 stalled took %v, over 10× MasterTimeout", took)
		}
		var e *redlock.Error
		if !errors.Is(err, redlock.ErrNotAcquired) || !errors.As(err, &e) {
			t.Fatalf("TryLock with 3 of 5 stalled: %v, want an *Error wrapping ErrNotAcquired", err)
		}
		if e.Count(quorum.OK) != 2 || e.Count(quorum.TimedOut) != 3 {
			t.Fatalf("%d ok, %d timed out, want 2 and 3: %v", e.Count(quorum.OK), e.Count(quorum.TimedOut), err)
		}
		for _, i := range []int{1, 3} {
			if v := value(t, c, i, lockKey(res)); v != "" {
				t.Fatalf("master %d holds %q after the failed round", i, v)
			}
		}
		c.ResumeAll()
		labtest.Eventually(t, 10*time.Second, func() error {
			if vs := values(t, c, lockKey(res)); fmt.Sprint(vs) != fmt.Sprint(make([]string, 5)) {
				return fmt.Errorf("keys left: %q", vs)
			}
			return nil
		})
	})
}

// A round that fails because another owner holds a majority releases what
// it took on the others before TryLock returns, and leaves the owner's
// keys alone.
func TestFailedRoundReleases(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{})
		res := "taken:" + k.name
		for _, i := range []int{0, 1, 2} {
			if err := c.Admin(i).Set(t.Context(), lockKey(res), "other", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := l.TryLock(t.Context(), res)
		if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrHeld) {
			t.Fatalf("TryLock: %v, want ErrNotAcquired and ErrHeld", err)
		}
		vs := values(t, c, lockKey(res))
		if want := []string{"other", "other", "other", "", ""}; fmt.Sprint(vs) != fmt.Sprint(want) {
			t.Fatalf("after the failed round: %q, want %q", vs, want)
		}
	})
}

// Fences grow from holder to holder, and each is the counter on a
// majority.
func TestFences(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{Fencing: true})
		res := "fenced:" + k.name
		var last uint64
		for round := range 3 {
			lk, err := l.TryLock(t.Context(), res)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if lk.Fence() <= last {
				t.Fatalf("round %d: fence %d after %d", round, lk.Fence(), last)
			}
			last = lk.Fence()
			at := 0
			for i := range c.N() {
				if v, _ := c.Admin(i).HGet(t.Context(), lockKey(res)+":fence", "fence").Result(); v == fmt.Sprint(last) {
					at++
				}
			}
			if at < 3 {
				t.Fatalf("round %d: fence %d is the counter on %d masters, want a majority", round, last, at)
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A waiter in Lock is woken by the holder's release: its backoff is
// ≥ 2.5 s, and it acquires well before.
func TestWakeOnRelease(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		holder := newLocker(t, c, k, redlock.Options{})
		retry := redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}
		waiter := newLocker(t, c, k, redlock.Options{Retry: retry})
		res := "baton:" + k.name
		lk, err := holder.TryLock(t.Context(), res)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *redlock.Lock, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			if l, err := waiter.Lock(ctx, res); err == nil {
				got <- l
			} else {
				t.Errorf("waiter: %v", err)
				close(got)
			}
		})
		// The waiter is queued (its first round failed) and subscribed
		// to the key's releases on a majority.
		labtest.Eventually(t, 10*time.Second, func() error {
			queued, subscribed := 0, 0
			for i := range c.N() {
				if m, _ := c.Admin(i).ZCard(t.Context(), lockKey(res)+":waiters").Result(); m > 0 {
					queued++
				}
				if chs, _ := c.Admin(i).PubSubChannels(t.Context(), lockKey(res)+":w:*").Result(); len(chs) > 0 {
					subscribed++
				}
			}
			if queued < 3 || subscribed < 3 {
				return fmt.Errorf("waiter queued on %d masters, subscribed on %d", queued, subscribed)
			}
			return nil
		})
		released := time.Now()
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case wl := <-got:
			if wl == nil {
				return
			}
			took := time.Since(released)
			t.Logf("waiter acquired %v after the release", took)
			if took > 2*time.Second {
				t.Fatalf("waiter acquired %v after the release, its backoff is ≥ 2.5 s: not woken", took)
			}
			if n := holding(t, c, lockKey(res), wl.Token()); n < 3 {
				t.Fatalf("the waiter's token on %d masters", n)
			}
			wl.Unlock(t.Context())
		case <-ctx.Done():
			t.Fatal("the waiter never acquired")
		}
	})
}

// TLS and an ACL user limited to the lock's keys: every kind acquires,
// fenced, and releases.
func TestTLSACL(t *testing.T) {
	c, err := lab.Start(t.Context(), 5, &lab.Options{TLS: true, ACLUser: "redlock"})
	if errors.Is(err, lab.ErrNeedsProcessBackend) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{Fencing: true, MasterTimeout: 2 * time.Second})
		res := "tls:" + k.name
		lk, err := l.TryLock(t.Context(), res)
		if err != nil {
			t.Fatal(err)
		}
		labtest.Eventually(t, 10*time.Second, func() error {
			if n := holding(t, c, lockKey(res), lk.Token()); n != 5 {
				return fmt.Errorf("the token on %d of 5 masters", n)
			}
			return nil
		})
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if vs := values(t, c, lockKey(res)); fmt.Sprint(vs) != fmt.Sprint(make([]string, 5)) {
			t.Fatalf("keys left after Unlock: %q", vs)
		}
	})
}

// Each kind reads the server's run_id when it connects: a master that is
// another one under a second name (on the fast path, through a dialer, so
// that New cannot see it) makes the first round fail with ErrInvalid, and
// nothing is taken.
func TestSameServerUnderTwoNames(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	const alias = "alias-of-master-0.invalid:6379"
	real := c.Addrs()[0]
	eachKind(t, c, func(t *testing.T, k kind) {
		ms := append(k.masters(t, c), driver.GoRedis(&redis.Options{Addr: alias,
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, real)
			}}))
		// Room for the first contact on a loaded machine: the first round
		// waits for every master to be identified, up to MasterTimeout.
		l, err := redlock.NewMasters(ms, &redlock.Options{MasterTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		res := "aliased:" + k.name
		lk, err := l.TryLock(t.Context(), res)
		if err == nil {
			lk.Unlock(t.Context())
		}
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "masters 0 and 3") {
			t.Fatalf("%s as master 3: %v, want ErrInvalid naming masters 0 and 3", alias, err)
		}
		if vs := values(t, c, lockKey(res)); fmt.Sprint(vs) != fmt.Sprint(make([]string, 3)) {
			t.Fatalf("keys left: %q", vs)
		}
	})
}

// The primitives added beside the mutex (semaphore, read-write lock,
// Adopt) send their own commands and scripts: each kind carries them
// without an adapter knowing what they are.
func TestPrimitives(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	eachKind(t, c, func(t *testing.T, k kind) {
		l := newLocker(t, c, k, redlock.Options{})
		sem, err := l.Semaphore("sem:"+k.name, 2)
		if err != nil {
			t.Fatal(err)
		}
		var permits []*redlock.Lock
		for range 2 {
			p, err := sem.TryAcquire(t.Context())
			if err != nil {
				t.Fatalf("TryAcquire of 2 permits: %v", err)
			}
			permits = append(permits, p)
		}
		if _, err := sem.TryAcquire(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("a third permit of 2: %v, want ErrNotAcquired", err)
		}
		if n, err := sem.Holders(t.Context()); err != nil || n != 2 {
			t.Fatalf("Holders: %d, %v; want 2", n, err)
		}
		for _, p := range permits {
			if err := p.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		rw, err := l.RWMutex("rw:" + k.name)
		if err != nil {
			t.Fatal(err)
		}
		r1, err := rw.TryRLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r2, err := rw.TryRLock(t.Context())
		if err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("a writer while two read: %v, want ErrNotAcquired", err)
		}
		r1.Unlock(t.Context())
		r2.Unlock(t.Context())
		w, err := rw.TryLock(t.Context())
		if err != nil {
			t.Fatalf("a writer once the readers left: %v", err)
		}
		adopted, err := l.Adopt(t.Context(), "adopt:"+k.name, "no-such-token")
		if err == nil {
			adopted.Unlock(t.Context())
			t.Fatal("Adopt of a token nobody holds succeeded")
		}
		w.Unlock(t.Context())
	})
}
