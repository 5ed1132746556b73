package redlock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// Successive holders get strictly increasing fences.
func TestFencesIncreaseAcrossHolders(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const lockers, each = 5, 40
	var mu sync.Mutex
	var fences []uint64
	var wg sync.WaitGroup
	for range lockers {
		l := newLocker(t, c, &redlock.Options{Fencing: true})
		wg.Go(func() {
			for range each {
				lk, err := l.Lock(t.Context(), "fenced")
				if err != nil {
					t.Error(err)
					return
				}
				// Appending while holding the lock records holders in the
				// order they held it.
				mu.Lock()
				fences = append(fences, lk.Fence())
				mu.Unlock()
				if err := lk.Unlock(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(fences) != lockers*each {
		t.Fatalf("%d acquisitions, want %d", len(fences), lockers*each)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d of holder %d not above %d of holder %d", fences[i], i, fences[i-1], i-1)
		}
	}
}

// fenceSource is how a scenario obtains fences: our Locker, or the naive
// per-master INCR-and-take-max that the scenario must break.
type fenceSource func(t *testing.T, resource string) uint64

// sharedMasterScenario runs docs/design.md §5's hard case: successive quorums
// that share only one master. It returns the fences in holding order.
func sharedMasterScenario(t *testing.T, c *lab.Masters, acquire fenceSource) []uint64 {
	t.Helper()
	var fences []uint64
	phase := func(paused []int, times int) {
		t.Helper()
		c.ResumeAll()
		for _, i := range paused {
			if err := c.Pause(i); err != nil {
				t.Fatal(err)
			}
		}
		for range times {
			fences = append(fences, acquire(t, "shared"))
		}
	}
	phase([]int{3, 4}, 10) // majority {1,2,3} (masters 0,1,2)
	phase([]int{1, 2}, 1)  // majority {1,4,5}
	phase([]int{0, 1}, 1)  // majority {3,4,5}
	c.ResumeAll()
	return fences
}

func strictlyIncreasing(f []uint64) error {
	for i := 1; i < len(f); i++ {
		if f[i] <= f[i-1] {
			return fmt.Errorf("fence #%d = %d after %d (all: %v)", i, f[i], f[i-1], f)
		}
	}
	return nil
}

// Fences stay strictly increasing when successive majorities share only
// one master.
func TestFencesIncreaseWhenQuorumsShareOneMaster(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	fences := sharedMasterScenario(t, c, func(t *testing.T, resource string) uint64 {
		// Lock, not TryLock: a master resumed at a phase change still has
		// our earlier SETs queued in its socket, and holds a key until their
		// late replies arrive and the Locker deletes it; retrying rides that
		// out.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		lk, err := l.Lock(ctx, resource)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		return lk.Fence()
	})
	if err := strictlyIncreasing(fences); err != nil {
		t.Fatal(err)
	}
}

// The test of the test: the same scenario with a plain per-master INCR and
// max must repeat or go back, or the scenario proves nothing.
func TestNaiveMaxOfCountersBreaksInSharedMasterScenario(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	naive := func(t *testing.T, resource string) uint64 {
		// Answering masters are the unpaused ones: INCR on each with a
		// short deadline, take the max.
		var fence uint64
		ok := 0
		for i := range c.N() {
			cl := redis.NewClient(&redis.Options{Addr: c.Addrs()[i], ContextTimeoutEnabled: true, MaxRetries: -1})
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			n, err := cl.Incr(ctx, "naive:"+resource).Uint64()
			cancel()
			cl.Close()
			if err == nil {
				ok++
				fence = max(fence, n)
			}
		}
		if ok != 3 {
			t.Fatalf("naive round reached %d masters, want the 3 unpaused", ok)
		}
		return fence
	}
	fences := sharedMasterScenario(t, c, naive)
	if err := strictlyIncreasing(fences); err == nil {
		t.Fatalf("naive INCR-and-max stayed monotonic (%v): the scenario does not exercise the hard case", fences)
	}
}

// A write-back that cannot reach a majority fails and releases.
func TestWriteBackWithoutMajorityFails(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	redlock.SetBetweenRounds(l, func() {
		for _, i := range []int{0, 1, 2} {
			if err := c.Pause(i); err != nil {
				t.Error(err)
			}
		}
	})
	_, err := l.TryLock(t.Context(), "wb")
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	var e *redlock.Error
	// Masters 0–2 time out; the round may decide before the last of them
	// does (and a live master whose first-round SET was still in flight
	// refuses the write-back).
	if !errors.As(err, &e) || e.Op != "fence" || e.Count(quorum.OK) >= 3 || e.Count(quorum.TimedOut) < 2 {
		t.Fatalf("want the fence round to fail on the paused masters, got %v", err)
	}
	noKeyOn(t, c, "wb", 3, 4)
	c.ResumeAll()
	waitGone(t, c, "wb", "the woken masters' keys to be released")
}

// The fenced resource rejects a stale holder.
func TestFencedWriteRejectsStaleHolder(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	resource := lab.ForTest(t, 1, nil).Client(0) // never faulted
	la := newLocker(t, c, &redlock.Options{Fencing: true, TTL: 200 * time.Millisecond, MasterTimeout: 40 * time.Millisecond})
	lb := newLocker(t, c, &redlock.Options{Fencing: true})
	// Lock, not TryLock: a round that a loaded machine stretches past the
	// 40 ms MasterTimeout is retried; what follows is what the test is about.
	a, err := la.Lock(t.Context(), "account")
	if err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(t.Context(), resource, "acct:1", a.Fence(), a.Token(), "A1"); err != nil {
		t.Fatal(err)
	}
	// A "pauses" past its deadline; its keys expire and B takes over.
	waitGone(t, c, "account", "A's keys to expire")
	b, err := lb.TryLock(t.Context(), "account")
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("B's fence %d not above A's %d", b.Fence(), a.Fence())
	}
	if err := redlock.WriteFenced(t.Context(), resource, "acct:1", b.Fence(), b.Token(), "B"); err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(t.Context(), resource, "acct:1", a.Fence(), a.Token(), "A2 (stale)"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("stale write: %v, want ErrStaleFence", err)
	}
	v, f, err := redlock.ReadFenced(t.Context(), resource, "acct:1")
	if err != nil || v != "B" || f != b.Fence() {
		t.Fatalf("resource holds %q at fence %d (%v), want B at %d", v, f, err, b.Fence())
	}
	// The holder may write again with its own fence; another owner with
	// the same fence (possible only if a lock master lost its counter) may
	// not.
	if err := redlock.WriteFenced(t.Context(), resource, "acct:1", b.Fence(), b.Token(), "B2"); err != nil {
		t.Fatal(err)
	}
	if err := redlock.WriteFenced(t.Context(), resource, "acct:1", b.Fence(), a.Token(), "same fence, other owner"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("equal fence from another owner: %v, want ErrStaleFence", err)
	}
	if v, _, _ := redlock.ReadFenced(t.Context(), resource, "acct:1"); v != "B2" {
		t.Fatalf("resource holds %q, want B2", v)
	}
	b.Unlock(t.Context())
}

// Bad input to the helper is an error, not a panic.
func TestFencedWriteBadInput(t *testing.T) {
	resource := lab.ForTest(t, 1, nil).Client(0)
	var nilClient *redis.Client
	for _, tc := range []struct {
		name  string
		c     redis.Scripter
		key   string
		fence uint64
		rule  string
	}{
		{"fence 0", resource, "k", 0, "fence is 0"},
		{"empty key", resource, "", 1, "key is empty"},
		{"nil client", nilClient, "k", 1, "nil client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := redlock.WriteFenced(t.Context(), tc.c, tc.key, tc.fence, "owner", "v")
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(fmt.Sprint(err), tc.rule) {
				t.Fatalf("WriteFenced: %v, want ErrInvalid naming %q", err, tc.rule)
			}
		})
	}
	if err := redlock.WriteFenced(t.Context(), resource, "k", 1, "", "v"); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "owner is empty") {
		t.Fatalf("WriteFenced with no owner: %v", err)
	}
	if v, f, err := redlock.ReadFenced(t.Context(), resource, "never-written"); err != nil || v != "" || f != 0 {
		t.Fatalf("ReadFenced of a fresh key: %q %d %v", v, f, err)
	}
}

// The price of fencing, side by side on the same masters.
// go test -run '^$' -bench TryLockUnlock ./redlock
func BenchmarkTryLockUnlock(b *testing.B) {
	c := lab.ForTest(b, 5, nil)
	for _, fencing := range []bool{false, true} {
		b.Run("fencing="+strconv.FormatBool(fencing), func(b *testing.B) {
			l, err := redlock.New(c.Clients(), &redlock.Options{Fencing: fencing})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				lk, err := l.TryLock(ctx, "bench:"+strconv.Itoa(i))
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// What fencing's assumption buys: with appendfsync always, masters that
// crash and come back with their data keep their counters, and the next
// fence is still larger than every earlier one, even when the new majority
// is made of the crashed masters.
func TestFencesSurviveCrashWithAppendFsyncAlways(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("skipping: RestartPersisted needs the Process backend and redis-server is not installed")
	}
	c := lab.ForTest(t, 3, &lab.Options{Backend: lab.Process, AppendFsyncAlways: true})
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	var fences []uint64
	acquire := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		lk, err := l.Lock(ctx, "durable")
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, lk.Fence())
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		acquire()
	}
	for _, i := range []int{0, 1} {
		if err := c.RestartPersisted(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	// Keep master 2 out of the next majority: only the crashed ones count.
	if err := c.Pause(2); err != nil {
		t.Fatal(err)
	}
	acquire()
	if err := strictlyIncreasing(fences); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if f, err := c.Client(i).HGet(t.Context(), "redlock:{durable}:fence", "fence").Uint64(); err != nil || f != fences[len(fences)-1] {
			t.Fatalf("master %d counter %d (%v), want %d", i, f, err, fences[len(fences)-1])
		}
	}
}

// The resource must not learn the writer's lock token
// (whoever reads it could then extend or delete that holder's keys). It
// stores the token's hex SHA-256 as the owner, and the equal-fence rule
// still tells holders apart by it.
func TestFencedWriteDoesNotStoreTheToken(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	resource := lab.ForTest(t, 1, nil).Client(0)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	lk, err := l.TryLock(t.Context(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(t.Context())
	tok := lk.Token()
	if err := redlock.WriteFenced(t.Context(), resource, "acct:2", lk.Fence(), tok, "v1"); err != nil {
		t.Fatal(err)
	}
	fields, err := resource.HGetAll(t.Context(), "acct:2").Result()
	if err != nil {
		t.Fatal(err)
	}
	for f, v := range fields {
		if strings.Contains(v, tok) || strings.Contains(f, tok) {
			t.Fatalf("resource field %q = %q holds the lock token %q", f, v, tok)
		}
	}
	sum := sha256.Sum256([]byte(tok))
	if want := hex.EncodeToString(sum[:]); fields["owner"] != want {
		t.Fatalf("stored owner %q, want the token's hex SHA-256 %q", fields["owner"], want)
	}
	if v, f, err := redlock.ReadFenced(t.Context(), resource, "acct:2"); err != nil || v != "v1" || f != lk.Fence() {
		t.Fatalf("ReadFenced: %q %d %v, want v1 at %d", v, f, err, lk.Fence())
	}
	// Same holder, same fence: accepted. Another owner, same fence: not.
	if err := redlock.WriteFenced(t.Context(), resource, "acct:2", lk.Fence(), tok, "v2"); err != nil {
		t.Fatalf("same owner, equal fence: %v", err)
	}
	if err := redlock.WriteFenced(t.Context(), resource, "acct:2", lk.Fence(), tok+"x", "intruder"); !errors.Is(err, redlock.ErrStaleFence) {
		t.Fatalf("other owner, equal fence: %v, want ErrStaleFence", err)
	}
	if v, _, _ := redlock.ReadFenced(t.Context(), resource, "acct:2"); v != "v2" {
		t.Fatalf("resource holds %q, want v2", v)
	}
}

// Fences are uint64s and must compare exactly over the
// whole range. Lua numbers are doubles, exact only up to 2^53: there
// tonumber makes 2^53 and 2^53+1 one number, and every fence near 2^64 the
// same.
func TestFencedWriteComparesLargeFencesExactly(t *testing.T) {
	resource := lab.ForTest(t, 1, nil).Client(0)
	const p53 = uint64(1) << 53
	write := func(key string, fence uint64, owner string) error {
		t.Helper()
		return redlock.WriteFenced(t.Context(), resource, key, fence, owner, owner+"@"+strconv.FormatUint(fence, 10))
	}
	accept := func(key string, fence uint64, owner string) {
		t.Helper()
		if err := write(key, fence, owner); err != nil {
			t.Errorf("write %s at fence %d: %v, want accepted", owner, fence, err)
		}
	}
	reject := func(key string, fence uint64, owner string) {
		t.Helper()
		if err := write(key, fence, owner); !errors.Is(err, redlock.ErrStaleFence) {
			t.Errorf("write %s at fence %d: %v, want ErrStaleFence", owner, fence, err)
		}
	}
	holds := func(key string, fence uint64, owner string) {
		t.Helper()
		v, f, err := redlock.ReadFenced(t.Context(), resource, key)
		if want := owner + "@" + strconv.FormatUint(fence, 10); err != nil || f != fence || v != want {
			t.Errorf("%s holds %q at fence %d (%v), want %q at %d", key, v, f, err, want, fence)
		}
	}

	accept("p53", p53, "a")
	accept("p53", p53+1, "b") // a double sees fence == last, and another owner
	holds("p53", p53+1, "b")
	reject("p53", p53, "b") // a double sees fence == last, and the same owner
	reject("p53", p53, "a")
	holds("p53", p53+1, "b")

	accept("top", math.MaxUint64-1, "a")
	accept("top", math.MaxUint64, "b") // both 2^64 as doubles
	reject("top", math.MaxUint64-1, "b")
	holds("top", math.MaxUint64, "b")

	// Strings compare by length first: "10" is after "9".
	accept("len", 9, "a")
	accept("len", 10, "b")
	reject("len", 9, "b")
	holds("len", 10, "b")

	// A stored "0" is zero, as a missing fence is.
	if err := resource.HSet(t.Context(), "zero", "fence", "0").Err(); err != nil {
		t.Fatal(err)
	}
	accept("zero", 1, "a")
	holds("zero", 1, "a")

	// A stored fence that is not a number is an error, not a guess.
	if err := resource.HSet(t.Context(), "junk", "fence", "1e3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := write("junk", 5, "a"); err == nil || errors.Is(err, redlock.ErrStaleFence) {
		t.Errorf("write over a corrupt fence: %v, want an error other than ErrStaleFence", err)
	}
}

// The write-back (round 2 of a fenced acquisition) compares the master's
// counter with the new fence in Lua too. Counters are set by hand past
// 2^53, on a majority: every majority then sees the largest.
func TestFenceWriteBackComparesLargeCountersExactly(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, &redlock.Options{Fencing: true})
	seed := func(resource string, counter uint64) {
		t.Helper()
		for _, i := range []int{0, 1} {
			if err := c.Client(i).HSet(t.Context(), "redlock:{"+resource+"}:fence", "fence", strconv.FormatUint(counter, 10), "owner", "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// acquire takes and releases the lock, and checks its fence and that a
	// majority of masters now hold it as their counter, digit for digit.
	acquire := func(resource string, want uint64) {
		t.Helper()
		lk, err := l.TryLock(t.Context(), resource)
		if err != nil {
			t.Fatalf("acquiring %s for fence %d: %v", resource, want, err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if lk.Fence() != want {
			t.Fatalf("fence %d, want %d", lk.Fence(), want)
		}
		var got []string
		for i := range c.N() {
			s, err := c.Client(i).HGet(t.Context(), "redlock:{"+resource+"}:fence", "fence").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if countValue(got, strconv.FormatUint(want, 10)) < 2 {
			t.Fatalf("masters' counters %q, want a majority at %d", got, want)
		}
	}
	const p53 = uint64(1) << 53
	seed("big", p53+1)
	acquire("big", p53+2)
	acquire("big", p53+3)
	acquire("big", p53+4) // counter p53+3 and fence p53+4 are one double
	seed("top", math.MaxUint64-2)
	acquire("top", math.MaxUint64-1) // both 2^64 as doubles
	acquire("top", math.MaxUint64)

	// Past the end: a majority's counters at the largest fence leave no
	// larger one to issue, so fenced acquisitions fail (and must never
	// hand out a smaller fence).
	seed("full", math.MaxUint64)
	if lk, err := l.TryLock(t.Context(), "full"); err == nil {
		lk.Unlock(t.Context())
		t.Fatalf("acquired with counters at MaxUint64: fence %d", lk.Fence())
	}
	for _, i := range []int{0, 1} {
		if s, err := c.Client(i).HGet(t.Context(), "redlock:{full}:fence", "fence").Result(); err != nil || s != "18446744073709551615" {
			t.Fatalf("master %d counter %q (%v), want it left at MaxUint64", i, s, err)
		}
	}
}
