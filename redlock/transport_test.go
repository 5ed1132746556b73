package redlock_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// After SCRIPT FLUSH on every master (what a restarted or failed-over
// master looks like), a release, an extension and a fenced acquisition
// get NOSCRIPT; each reloads the scripts and is sent again: Unlock leaves
// no key, Extend and a fenced TryLock succeed. Both transports.
func TestNoScriptResent(t *testing.T) {
	for _, via := range []bool{false, true} {
		t.Run(map[bool]string{false: "resp", true: "plain"}[via], func(t *testing.T) {
			c := lab.ForTest(t, 5, nil)
			l := newLocker(t, c, &redlock.Options{ViaClient: via, TTL: time.Minute})
			flush := func() {
				t.Helper()
				for i := range c.N() {
					if err := c.Client(i).ScriptFlush(t.Context()).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			lk, err := l.TryLock(t.Context(), "noscript")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "noscript"), lk.Token()) == 5 })
			flush()
			if err := lk.Extend(t.Context()); err != nil {
				t.Fatalf("Extend after SCRIPT FLUSH: %v", err)
			}
			flush()
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
			}
			// The TTL is a minute: a key still there in 10 s was not released.
			waitGone(t, c, "noscript", "the keys to be released after SCRIPT FLUSH")
			flush()
			fenced := newLocker(t, c, &redlock.Options{ViaClient: via, TTL: time.Minute, Fencing: true})
			if _, err := fenced.TryLock(t.Context(), "warm-up"); err != nil { // connect, loading the scripts
				t.Fatal(err)
			}
			flush()
			fl, err := fenced.TryLock(t.Context(), "noscript-fenced")
			if err != nil {
				t.Fatalf("fenced TryLock after SCRIPT FLUSH: %v", err)
			}
			if fl.Fence() == 0 {
				t.Fatal("fenced lock without a fence")
			}
			if err := fl.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, "noscript-fenced", "the fenced keys to be released")
		})
	}
}

// Close does not wait for a dial in progress: with master 0 stalled at
// first contact (its handshake unanswered for the client's whole
// DialTimeout, 5 s), Close returns within MasterTimeout + 100 ms.
func TestCloseDuringDial(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	const nt = 500 * time.Millisecond
	l, err := redlock.New(c.Clients(), &redlock.Options{MasterTimeout: nt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.ResumeAll)
	lk, err := l.TryLock(t.Context(), "dialling") // master 0's dial is now in progress
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l.Close()
	if took := time.Since(start); took > nt+100*time.Millisecond {
		t.Fatalf("Close took %v with a dial in progress; want at most MasterTimeout + 100 ms", took)
	}
}

// A release parked because its master could not be reached goes out when
// the master can be reached again, with no further traffic to that master:
// the stream tries again on its own.
func TestParkedReleaseWithoutTraffic(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	l := proxiedLocker(t, c, func(_ int, o *redis.Options) { o.DialTimeout = 300 * time.Millisecond },
		&redlock.Options{MasterTimeout: 200 * time.Millisecond, TTL: time.Minute})
	lk, err := l.TryLock(t.Context(), "parked")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token on all 5 masters", func() bool { return countValue(keyState(t, c, "parked"), lk.Token()) == 5 })
	if err := c.Cut(0); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release to master 0 to be parked", func() bool { return l.Stats()[0].Deferred == 1 })
	if err := c.Heal(0); err != nil {
		t.Fatal(err)
	}
	// The TTL is a minute: a key still there in 10 s was not released.
	waitGone(t, c, "parked", "the parked release to reach master 0 with no other traffic")
	if d := l.Stats()[0].Deferred; d != 0 {
		t.Fatalf("%d releases still deferred", d)
	}
}

// A release never runs on a master before a SET of the same lock sent
// earlier to it, across reconnects too. The SET to master 0 is held in the
// network (DelayOpen) past the client's ReadTimeout; the stream gives up on
// that connection, dials again and sends the release on the new one. The
// late SET must not land after it: no key is left once the delayed data
// has had its time to arrive.
func TestReleaseNotOvertakenAcrossReconnect(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	overtake(t, c, nil)
	noKeyOn(t, c, "overtaken", 0, 1, 2, 3, 4)
}

// The same with an ACL user: the README's rules (lab.DefaultACLRules)
// allow what it needs (CLIENT ID, CLIENT KILL). Without those two the
// Locker still works, and warns once that the guarantee is lost.
func TestReleaseOrderUnderACL(t *testing.T) {
	without := strings.ReplaceAll(lab.DefaultACLRules, " +client|id +client|kill", "")
	if without == lab.DefaultACLRules {
		t.Fatal("lab.DefaultACLRules no longer ends with +client|id +client|kill")
	}
	for _, tc := range []struct {
		name, rules string
		warned      bool
	}{{"default rules", "", false}, {"without client kill", without, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := lab.ForTest(t, 5, &lab.Options{Proxy: true, ACLUser: "locker", ACLRules: tc.rules})
			var logs syncBuffer
			overtake(t, c, slog.New(slog.NewTextHandler(&logs, nil)))
			warned := strings.Contains(logs.String(), "cannot end the previous connection")
			if warned != tc.warned {
				t.Fatalf("warned %v, want %v; log:\n%s", warned, tc.warned, logs.String())
			}
			if !tc.warned {
				noKeyOn(t, c, "overtaken", 0, 1, 2, 3, 4)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// overtake runs the reconnect scenario on resource "overtaken" and returns
// once the SET held on master 0's old connection has had 700 ms past its
// arrival time to land.
func overtake(t *testing.T, c *lab.Masters, log *slog.Logger) {
	t.Helper()
	const (
		nt    = 200 * time.Millisecond
		rt    = 500 * time.Millisecond // the client's ReadTimeout: when the stream gives up
		delay = 2500 * time.Millisecond
	)
	user, pass := c.ACLUser()
	l := proxiedLocker(t, c, func(_ int, o *redis.Options) { o.Username, o.Password, o.ReadTimeout = user, pass, rt },
		&redlock.Options{MasterTimeout: nt, TTL: time.Minute, Logger: log})
	warm, err := l.TryLock(t.Context(), "warm-up") // connect to all five
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(t.Context())
	if n, err := c.DelayOpen(0, delay, 0); err != nil || n != 1 {
		t.Fatalf("DelayOpen: %d connections, %v; want the stream's one", n, err)
	}
	start := time.Now()
	lk, err := l.TryLock(t.Context(), "overtaken")
	if err != nil {
		t.Fatal(err)
	}
	if o := lk.Acquisition().Masters[0].Outcome; o != quorum.Pending {
		t.Fatalf("master 0: %v, want pending (its SET is held in the network)", o)
	}
	// Past the ReadTimeout the next command makes the stream give up on
	// the silent connection: the release is parked, and sent on a new one.
	time.Sleep(time.Until(start.Add(rt + 400*time.Millisecond)))
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release to reach master 0 on a new connection", func() bool { return l.Stats()[0].Deferred == 0 })
	// The SET held on the old connection arrives at start+delay, if at
	// all; 200 ms later (plus room for a loaded machine) no key may be left.
	time.Sleep(time.Until(start.Add(delay + 700*time.Millisecond)))
	if _, err := l.TryLock(t.Context(), "after"); err != nil {
		t.Fatalf("the Locker after the reconnect: %v", err)
	}
}

// On the plain path go-redis must not send a batch again by itself: a SET
// that ran but whose reply was late would answer nil the second time,
// count as refused, and its master would never get the release. Master
// 0's replies are held past its client's ReadTimeout, and the other
// masters answer later still, so that master 0's outcome is counted;
// after Unlock no key may be left on it.
func TestPlainPathNotResentByClient(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	l := proxiedLocker(t, c, func(i int, o *redis.Options) {
		if i == 0 {
			o.ReadTimeout = 100 * time.Millisecond
		}
	}, &redlock.Options{ViaClient: true, MasterTimeout: time.Second, TTL: time.Minute})
	warm, err := l.TryLock(t.Context(), "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(t.Context())
	if n, err := c.DelayOpen(0, 0, 2*time.Second); err != nil || n == 0 {
		t.Fatalf("DelayOpen: %d connections, %v", n, err)
	}
	for i := 1; i < c.N(); i++ {
		if err := c.Latency(i, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	lk, err := l.TryLock(t.Context(), "resent")
	if err != nil {
		t.Fatal(err)
	}
	if o := lk.Acquisition().Masters[0].Outcome; o == quorum.Refused {
		t.Errorf("master 0 counted as refused: its SET ran (reply late), and a re-send was refused (%+v)", lk.Acquisition().Masters)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < c.N(); i++ {
		if err := c.Latency(i, 0); err != nil {
			t.Fatal(err)
		}
	}
	noKeyOn(t, c, "resent", 1, 2, 3, 4)
	// The TTL is a minute: a key still there in 10 s was not released. (A
	// new client: the lab's own may have a delayed connection.)
	fresh := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	defer fresh.Close()
	waitFor(t, "no key left on master 0 after Unlock", func() bool {
		n, err := fresh.Exists(t.Context(), "redlock:{resent}").Result()
		return err == nil && n == 0
	})
}

// A release written on a connection that then goes silent (its replies
// are lost) is not left waiting for other traffic either: once the
// connection has been silent for the client's ReadTimeout the stream
// gives up on it by itself, and the release goes out on a new one.
func TestReleaseOnSilentConnectionWithoutTraffic(t *testing.T) {
	c := lab.ForTest(t, 5, &lab.Options{Proxy: true})
	l := proxiedLocker(t, c, func(_ int, o *redis.Options) { o.ReadTimeout = 500 * time.Millisecond },
		&redlock.Options{MasterTimeout: 200 * time.Millisecond, TTL: time.Minute})
	warm, err := l.TryLock(t.Context(), "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(t.Context())
	lk, err := l.TryLock(t.Context(), "silent")
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { return countValue(keyState(t, c, "silent"), lk.Token()) == 5 }) {
		t.Fatalf("the token is not on all 5 masters: %q (token %q); acquisition %+v; stats %+v", keyState(t, c, "silent"), lk.Token(), lk.Acquisition().Masters, l.Stats())
	}
	// Nothing gets through on master 0's connection any more, either way.
	// (The lab's own client to master 0 is held too: a new one reads.)
	if n, err := c.DelayOpen(0, time.Hour, time.Hour); err != nil || n < 1 {
		t.Fatalf("DelayOpen: %d connections, %v", n, err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	fresh := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	defer fresh.Close()
	// The TTL is a minute: a key still there in 10 s was not released.
	waitFor(t, "the release on the silent connection to be sent again", func() bool {
		n, err := fresh.Exists(t.Context(), "redlock:{silent}").Result()
		return err == nil && n == 0
	})
	noKeyOn(t, c, "silent", 1, 2, 3, 4)
}

// proxiedLocker returns a Locker on c's masters through clients of its
// own (set sets each client's options), closed when the test ends.
func proxiedLocker(t *testing.T, c *lab.Masters, set func(i int, o *redis.Options), opts *redlock.Options) *redlock.Locker {
	t.Helper()
	clients := make([]redis.UniversalClient, c.N())
	for i, a := range c.Addrs() {
		o := &redis.Options{Addr: a}
		set(i, o)
		cl := redis.NewClient(o)
		t.Cleanup(func() { cl.Close() })
		clients[i] = cl
	}
	l, err := redlock.New(clients, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
