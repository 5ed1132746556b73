package tlsacl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	user = "redlock"
	ttl  = 10 * time.Second
	// nodeTimeout is generous: the first round of a Locker also dials and
	// makes a TLS handshake with every master, on two loaded cores under
	// -race.
	nodeTimeout = 2 * time.Second
)

// secure starts n masters with TLS and the ACL user limited to rules
// (lab.DefaultACLRules when empty). It skips the test where the lab runs
// on Docker ($REDLOCK_LAB_BACKEND, when redis-server is not installed),
// which does not support TLS and ACL users.
func secure(t *testing.T, n int, rules string) *lab.Masters {
	t.Helper()
	c, err := lab.Start(t.Context(), n, &lab.Options{TLS: true, ACLUser: user, ACLRules: rules})
	if errors.Is(err, lab.ErrNeedsProcessBackend) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("starting %d masters with TLS and an ACL user: %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("lab: close: %v", err)
		}
	})
	return c
}

// transports are the Locker's two paths to a master.
var transports = []struct {
	name      string
	viaClient bool
}{{"fast", false}, {"via-client", true}}

// newLocker returns a Locker over new clients of c (TLS, the ACL user),
// closed when the test ends.
func newLocker(t *testing.T, c *lab.Masters, o redlock.Options) *redlock.Locker {
	t.Helper()
	o.TTL, o.MasterTimeout = ttl, nodeTimeout
	l, err := redlock.New(c.Clients(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// onEach checks f on every master through the admin connection.
func onEach(t *testing.T, c *lab.Masters, f func(i int, admin *redis.Client) error) {
	t.Helper()
	for i := range c.N() {
		if err := f(i, c.Admin(i)); err != nil {
			t.Errorf("master %d: %v", i, err)
		}
	}
}

// landed is how long a command sent to every master may take to land on
// the ones the round did not wait for: an acquisition or an extension
// returns once a majority answered, and the others' replies are on their
// way (healthy masters, ordered streams).
const landed = 5 * time.Second

// eventuallyOnEach checks f on every master, retrying each for up to
// landed.
func eventuallyOnEach(t *testing.T, c *lab.Masters, f func(i int, admin *redis.Client) error) {
	t.Helper()
	for i := range c.N() {
		deadline := time.Now().Add(landed)
		for {
			err := f(i, c.Admin(i))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("master %d (after %v): %v", i, landed, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func keyOf(resource string) string { return redlock.DefaultKeyPrefix + "{" + resource + "}" }

// TestCore: acquire, extend, release and fences, on TLS masters as the
// restricted user, on both transports; what each step did is read on
// every master as the admin.
func TestCore(t *testing.T) {
	c := secure(t, 5, "")
	ctx := t.Context()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			l := newLocker(t, c, redlock.Options{ViaClient: tr.viaClient})
			res := "core-" + tr.name
			key := keyOf(res)

			lk, err := l.TryLock(ctx, res)
			if err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			eventuallyOnEach(t, c, func(_ int, a *redis.Client) error {
				if v, err := a.Get(ctx, key).Result(); err != nil || v != lk.Token() {
					return fmt.Errorf("after acquire: %s = %q, %v; want the token %q", key, v, err, lk.Token())
				}
				return nil
			})
			// Contention is still contention: ErrNotAcquired, not ErrInvalid.
			_, err = l.TryLock(ctx, res)
			if !errors.Is(err, redlock.ErrNotAcquired) || errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("second TryLock = %v, want ErrNotAcquired and not ErrInvalid", err)
			}

			// Shorten the keys, then extend: every master's PTTL is back
			// near the TTL.
			onEach(t, c, func(_ int, a *redis.Client) error { return a.PExpire(ctx, key, 3*time.Second).Err() })
			if err := lk.Extend(ctx); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			eventuallyOnEach(t, c, func(_ int, a *redis.Client) error {
				if d, err := a.PTTL(ctx, key).Result(); err != nil || d <= 5*time.Second || d > ttl {
					return fmt.Errorf("after extend: PTTL %v, %v; want in (5s, %v]", d, err, ttl)
				}
				return nil
			})

			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			onEach(t, c, func(_ int, a *redis.Client) error {
				if n, err := a.Exists(ctx, key).Result(); err != nil || n != 0 {
					return fmt.Errorf("after unlock: EXISTS %s = %d, %v; want 0", key, n, err)
				}
				return nil
			})
		})
	}
}

// TestFences: with Options.Fencing, holders taking turns through two
// Lockers (one per transport) get strictly increasing fences, each written
// back to every master's counter; WriteFenced and ReadFenced work with a
// resource user limited to what they need (fencedRules).
func TestFences(t *testing.T) {
	c := secure(t, 5, "")
	// The resource's own Redis, with its own restricted user: WriteFenced
	// runs a script (EVALSHA, EVAL the first time) that calls HGET and
	// HSET; ReadFenced is one HMGET.
	const fencedRules = "resetkeys ~acct:* -@all +evalsha +eval +hget +hset +hmget"
	store := secure(t, 1, fencedRules)
	rc := store.Client(0)
	ctx := t.Context()
	lockers := []*redlock.Locker{
		newLocker(t, c, redlock.Options{Fencing: true}),
		newLocker(t, c, redlock.Options{Fencing: true, ViaClient: true}),
	}
	const res, acct = "fences", "acct:1"
	var last uint64
	for turn := range 6 {
		lk, err := lockers[turn%2].TryLock(ctx, res)
		if err != nil {
			t.Fatalf("turn %d: TryLock: %v", turn, err)
		}
		if lk.Fence() <= last {
			t.Fatalf("turn %d: fence %d, not above the previous %d", turn, lk.Fence(), last)
		}
		last = lk.Fence()
		eventuallyOnEach(t, c, func(_ int, a *redis.Client) error {
			if f, err := a.HGet(ctx, keyOf(res)+":fence", "fence").Uint64(); err != nil || f != lk.Fence() {
				return fmt.Errorf("turn %d: fence counter %d, %v; want %d", turn, f, err, lk.Fence())
			}
			return nil
		})
		val := fmt.Sprint("v", turn)
		if err := redlock.WriteFenced(ctx, rc, acct, lk.Fence(), lk.Token(), val); err != nil {
			t.Fatalf("turn %d: WriteFenced: %v", turn, err)
		}
		// A stale holder (the previous fence) is rejected.
		if turn > 0 {
			if err := redlock.WriteFenced(ctx, rc, acct, lk.Fence()-1, "stale", "x"); !errors.Is(err, redlock.ErrStaleFence) {
				t.Fatalf("turn %d: stale WriteFenced = %v, want ErrStaleFence", turn, err)
			}
		}
		v, f, err := redlock.ReadFenced(ctx, rc, acct)
		if err != nil || v != val || f != lk.Fence() {
			t.Fatalf("turn %d: ReadFenced = %q, %d, %v; want %q, %d", turn, v, f, err, val, lk.Fence())
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("turn %d: Unlock: %v", turn, err)
		}
	}
	// The resource user cannot touch keys outside its pattern.
	if err := redlock.WriteFenced(ctx, rc, "other:1", 1, "o", "x"); err == nil || !containsAll(err.Error(), "NOPERM") {
		t.Errorf("WriteFenced outside the resource user's keys = %v, want NOPERM", err)
	}
}

// TestUserLimits: the ACL line keeps the user to its key prefix and its
// channels, and to the commands listed; AUTH and HELLO need no permission
// (go-redis's handshake is HELLO 3 AUTH), and the master accepts only TLS.
func TestUserLimits(t *testing.T) {
	c := secure(t, 1, "")
	ctx := t.Context()
	cl := c.Client(0)
	if err := cl.Set(ctx, "redlock:x", "1", time.Minute).Err(); err != nil {
		t.Fatalf("SET under the prefix: %v", err)
	}
	if err := cl.Set(ctx, "other:x", "1", time.Minute).Err(); err == nil || !containsAll(err.Error(), "NOPERM", "keys") {
		t.Errorf("SET outside the prefix = %v, want NOPERM naming the keys", err)
	}
	if err := cl.Do(ctx, "KEYS", "*").Err(); err == nil || !containsAll(err.Error(), "NOPERM", "'keys'") {
		t.Errorf("KEYS = %v, want NOPERM", err)
	}
	if err := cl.Ping(ctx).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
	if err := cl.Publish(ctx, "redlock:{x}", "released").Err(); err != nil {
		t.Errorf("PUBLISH under the prefix: %v", err)
	}
	if err := cl.Publish(ctx, "other", "x").Err(); err == nil || !containsAll(err.Error(), "NOPERM", "channel") {
		t.Errorf("PUBLISH outside the prefix = %v, want NOPERM naming the channel", err)
	}
	// SUBSCRIBE and UNSUBSCRIBE on a dedicated connection.
	ps := cl.Subscribe(ctx, "redlock:{x}")
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Errorf("SUBSCRIBE under the prefix: %v", err)
	}
	if err := ps.Unsubscribe(ctx, "redlock:{x}"); err != nil {
		t.Errorf("UNSUBSCRIBE: %v", err)
	}
	ps.Close()
	ps = cl.Subscribe(ctx, "other")
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err == nil || !containsAll(err.Error(), "NOPERM", "channel") {
		t.Errorf("SUBSCRIBE outside the prefix = %v, want NOPERM naming the channel", err)
	}
	ps.Close()

	// Without TLS the master does not answer; without the user, NOAUTH.
	plain := redis.NewClient(&redis.Options{Addr: c.Addrs()[0], MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("PING over plain TCP to a TLS-only master succeeded")
	}
	anon := redis.NewClient(&redis.Options{Addr: c.Addrs()[0], TLSConfig: c.TLSConfig(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !containsAll(err.Error(), "NOAUTH") {
		t.Errorf("PING without logging in = %v, want NOAUTH", err)
	}
}

// TestDuplicateStillCaught: the restricted user may read INFO, so one
// master under two names is still ErrInvalid: the second name reaches
// localhost (in its certificate) through a dialer, which New cannot see
// (it refuses 127.0.0.1 and localhost for one port itself).
func TestDuplicateStillCaught(t *testing.T) {
	c := secure(t, 3, "")
	u, pw := c.ACLUser()
	addrs := c.Addrs()
	_, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	var ms []redis.UniversalClient
	for _, a := range []string{addrs[0], "alias-of-master-0.invalid:" + port, addrs[1]} {
		o := &redis.Options{Addr: a, TLSConfig: c.TLSConfig(), Username: u, Password: pw}
		if strings.HasPrefix(a, "alias") {
			dial := redis.NewDialer(&redis.Options{TLSConfig: c.TLSConfig()})
			o.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dial(ctx, network, "localhost:"+port)
			}
		}
		cl := redis.NewClient(o)
		t.Cleanup(func() { cl.Close() })
		ms = append(ms, cl)
	}
	for _, tr := range transports {
		l, err := redlock.New(ms, &redlock.Options{TTL: ttl, MasterTimeout: nodeTimeout, ViaClient: tr.viaClient})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.TryLock(t.Context(), "dup-"+tr.name)
		l.Close()
		if !errors.Is(err, redlock.ErrInvalid) || !containsAll(err.Error(), "same server") {
			t.Errorf("%s: TryLock over one master named twice = %v, want ErrInvalid (same server)", tr.name, err)
		}
	}
}
