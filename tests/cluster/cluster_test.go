//go:build unix

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/redlock"
)

// cl is 3 independent clusters × 3 shards, shared by the tests (each uses
// resources of its own and resumes what it pauses).
var cl *lab.Clusters

func TestMain(m *testing.M) {
	if b := os.Getenv("REDLOCK_LAB_BACKEND"); b != "" && b != string(lab.Process) {
		fmt.Printf("tests/cluster: skipped: clusters need the process backend (REDLOCK_LAB_BACKEND=%s)\n", b)
		os.Exit(0)
	}
	var err error
	cl, err = lab.StartClusters(context.Background(), 3, 3, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting 3 clusters of 3 shards: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cl.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: closing the clusters: %v\n", err)
		code = 1
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: goroutines left after the tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func lockKey(resource string) string { return redlock.DefaultKeyPrefix + "{" + resource + "}" }

// resourceOn returns a resource name starting with prefix whose keys are
// on shard s (in every cluster: they split slots alike).
func resourceOn(prefix string, s int) string {
	for k := 0; ; k++ {
		r := fmt.Sprintf("%s-%d", prefix, k)
		if cl.ShardOf(lockKey(r)) == s {
			return r
		}
	}
}

// newLocker is a Locker over fresh cluster clients, closed at cleanup.
// Where a test sets no MasterTimeout it gets 500 ms: a fresh cluster
// client's first round also reads the slot map and dials the shards, which
// on a loaded machine overran the default 50 ms on 2 of 3 clusters
// (TestLockAllOnClusters beside stress-ng). Tests of stalls set their own.
func newLocker(t *testing.T, opts *redlock.Options) *redlock.Locker {
	t.Helper()
	o := redlock.Options{}
	if opts != nil {
		o = *opts
	}
	if o.MasterTimeout == 0 {
		o.MasterTimeout = 500 * time.Millisecond
	}
	l, err := redlock.New(cl.Clients(), &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// held returns what shard node of cluster i holds at resource's lock key
// ("" when absent), asking the node that owns its slot directly.
func held(t *testing.T, i int, resource string) string {
	t.Helper()
	key := lockKey(resource)
	v, err := cl.Node(i, cl.ShardOf(key)).Get(t.Context(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("cluster %d: GET %s: %v", i, key, err)
	}
	return v
}

// lockKeysLeft is lockKeysEverywhere once no lock key is left, or within
// has passed: Unlock waits at most MasterTimeout for each master, and a
// slower master's release lands after it returned (on a loaded machine,
// past an immediate look). within must be shorter than the keys' TTL, so that
// a key gone by then was released, not expired.
func lockKeysLeft(t *testing.T, prefix string, within time.Duration) []string {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if left := lockKeysEverywhere(t, prefix); len(left) == 0 || time.Now().After(end) {
			return left
		}
	}
}

// lockKeysEverywhere lists the lock keys (not fence counters) starting
// with prefix on every node of every cluster.
func lockKeysEverywhere(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for i := range cl.N() {
		for s := range cl.Shards() {
			keys, err := cl.Node(i, s).Keys(t.Context(), redlock.DefaultKeyPrefix+"{"+prefix+"*").Result()
			if err != nil {
				t.Fatalf("cluster %d shard %d: KEYS: %v", i, s, err)
			}
			for _, k := range keys {
				if !strings.HasSuffix(k, ":fence") {
					out = append(out, fmt.Sprintf("cluster %d shard %d: %s", i, s, k))
				}
			}
		}
	}
	return out
}

// Several Lockers, each with its own cluster clients, contend for a few
// resources spread over the shards; a checker fails on two holders at
// once. TTL 10 s leaves every holder far more validity than it holds the
// lock for, so an overlap can only be a broken lock.
func TestMutualExclusion(t *testing.T) {
	const lockers, workers, rounds = 3, 4, 25
	resources := []string{resourceOn("mx", 0), resourceOn("mx", 1), resourceOn("mx", 2)}
	holders := make([]atomic.Int32, len(resources))
	var acquired, overlaps atomic.Int64
	opts := &redlock.Options{MasterTimeout: 500 * time.Millisecond, Retry: redlock.RetryPolicy{MinDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range lockers {
		l := newLocker(t, opts)
		for w := range workers {
			wg.Go(func() {
				for n := range rounds {
					r := (w + n) % len(resources)
					lk, err := l.Lock(ctx, resources[r])
					if err != nil {
						t.Errorf("Lock %s: %v", resources[r], err)
						return
					}
					if holders[r].Add(1) != 1 {
						overlaps.Add(1)
					}
					acquired.Add(1)
					time.Sleep(100 * time.Microsecond)
					holders[r].Add(-1)
					if err := lk.Unlock(ctx); err != nil {
						t.Errorf("Unlock %s: %v", resources[r], err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d times two holders at once", n)
	}
	if got, want := acquired.Load(), int64(lockers*workers*rounds); got != want {
		t.Fatalf("%d acquisitions, want %d", got, want)
	}
	if left := lockKeysLeft(t, "mx", redlock.DefaultTTL/2); len(left) > 0 {
		t.Fatalf("lock keys left after every Unlock: %v", left)
	}
}

// An acquisition that gets only cluster 0 (the other two hold another
// owner's token) fails, and releases cluster 0's key before returning;
// the other owner's keys are untouched.
func TestReleaseAfterFailedAcquisition(t *testing.T) {
	l := newLocker(t, &redlock.Options{MasterTimeout: 500 * time.Millisecond})
	for s := range cl.Shards() {
		r := resourceOn("failed", s)
		for i := 1; i < cl.N(); i++ {
			if err := cl.Client(i).Set(t.Context(), lockKey(r), "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := l.TryLock(t.Context(), r)
		if !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("shard %d: TryLock: %v, want ErrNotAcquired", s, err)
		}
		var e *redlock.Error
		if !errors.As(err, &e) || len(e.Masters) != 3 {
			t.Fatalf("shard %d: %v is not an *Error with 3 nodes", s, err)
		}
		if e.Masters[1].Outcome != quorum.Refused || e.Masters[2].Outcome != quorum.Refused {
			t.Fatalf("shard %d: outcomes %v, %v on the held clusters, want Refused", s, e.Masters[1].Outcome, e.Masters[2].Outcome)
		}
		if v := held(t, 0, r); v != "" {
			t.Errorf("shard %d: cluster 0 still holds %q after the failed acquisition", s, v)
		}
		for i := 1; i < cl.N(); i++ {
			if v := held(t, i, r); v != "someone-else" {
				t.Errorf("shard %d: cluster %d holds %q, want the other owner's token", s, i, v)
			}
			cl.Client(i).Del(t.Context(), lockKey(r))
		}
	}
}

// A holder that crashes (its Locker closed without Unlock) leaves its
// token on the owning shard of every cluster until the TTL; then another
// Locker gets the lock, and its Unlock leaves no key on any shard.
func TestReleaseAfterHolderCrash(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	opts := &redlock.Options{TTL: ttl, MasterTimeout: 300 * time.Millisecond}
	r := resourceOn("crash", 1)
	a, err := redlock.New(cl.Clients(), opts)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := a.TryLock(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	a.Close() // the crash: no release
	for i := range cl.N() {
		if v := held(t, i, r); v != lk.Token() {
			t.Fatalf("cluster %d holds %q, want the crashed holder's token", i, v)
		}
	}
	b := newLocker(t, opts)
	if _, err := b.TryLock(t.Context(), r); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the crashed holder's keys live: %v, want ErrNotAcquired", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*ttl)
	defer cancel()
	// Its keys live 30 s: any gone within 10 s of its Unlock was released.
	lk2, err := b.Lock(ctx, r, redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatalf("Lock after the TTL: %v", err)
	}
	if waited := time.Since(lk.Acquisition().Start); waited < ttl-100*time.Millisecond {
		t.Errorf("got the lock %v after the crashed holder, before its TTL %v", waited, ttl)
	}
	if err := lk2.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := lockKeysLeft(t, "crash", 10*time.Second); len(left) > 0 {
		t.Fatalf("lock keys left after Unlock: %v", left)
	}
}

// With Fencing, successive holders from different Lockers get strictly
// increasing fences; the counters live next to the lock keys on the
// owning shards; WriteFenced on a cluster client (another cluster, the
// resource's own store) rejects a stale holder.
func TestFenceOrder(t *testing.T) {
	store, err := lab.StartClusters(t.Context(), 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := &redlock.Options{Fencing: true, MasterTimeout: 500 * time.Millisecond}
	ls := []*redlock.Locker{newLocker(t, opts), newLocker(t, opts), newLocker(t, opts)}
	for s := range cl.Shards() {
		r := resourceOn("fence", s)
		dataKey := "data:{" + r + "}"
		var last uint64
		var prev *redlock.Lock
		for n := range 9 {
			lk, err := ls[n%len(ls)].TryLock(t.Context(), r)
			if err != nil {
				t.Fatalf("shard %d holder %d: %v", s, n, err)
			}
			if lk.Fence() <= last {
				t.Fatalf("shard %d holder %d: fence %d after %d", s, n, lk.Fence(), last)
			}
			last = lk.Fence()
			if err := redlock.WriteFenced(t.Context(), store.Client(0), dataKey, lk.Fence(), lk.Token(), fmt.Sprint(n)); err != nil {
				t.Fatalf("shard %d holder %d: WriteFenced: %v", s, n, err)
			}
			if prev != nil {
				err := redlock.WriteFenced(t.Context(), store.Client(0), dataKey, prev.Fence(), prev.Token(), "stale")
				if !errors.Is(err, redlock.ErrStaleFence) {
					t.Fatalf("shard %d: the previous holder's write: %v, want ErrStaleFence", s, err)
				}
			}
			// TryLock returns once a majority of clusters took the
			// write-back; the last one's lands on its own stream.
			for i := range cl.N() {
				fk := lockKey(r) + ":fence"
				deadline := time.Now().Add(5 * time.Second)
				for {
					got, err := cl.Node(i, s).HGet(t.Context(), fk, "fence").Uint64()
					if err == nil && got == lk.Fence() {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("cluster %d shard %d: %s = %d, %v after 5s; want %d", i, s, fk, got, err, lk.Fence())
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			prev = lk
		}
		v, f, err := redlock.ReadFenced(t.Context(), store.Client(0), dataKey)
		if err != nil || v != "8" || f != last {
			t.Fatalf("shard %d: ReadFenced = %q, %d, %v; want \"8\", %d", s, v, f, err, last)
		}
	}
}

// Shard sA of cluster 0 is stalled (SIGSTOP). A resource on sA sees
// cluster 0 as not answering (Pending, then Unavailable once its breaker
// opens) and is still acquired through clusters 1 and 2; a resource on
// another shard still gets OK from cluster 0 and its key lands there.
// After the resume, the release deferred for sA is delivered.
func TestStalledShardOnlySlowsItsSlots(t *testing.T) {
	const nt = 300 * time.Millisecond
	l := newLocker(t, &redlock.Options{MasterTimeout: nt})
	const sA = 1
	a := resourceOn("stall-a", sA)
	healthy := []string{resourceOn("stall-b", 0), resourceOn("stall-b", 2)}
	// Dial every shard stream first.
	for _, r := range append([]string{a}, healthy...) {
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Pause(0, sA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.ResumeAll)

	lkA, err := l.TryLock(t.Context(), a)
	if err != nil {
		t.Fatalf("TryLock on the stalled shard's slots (clusters 1 and 2 answer): %v", err)
	}
	if o := lkA.Acquisition().Masters[0].Outcome; o != quorum.Pending && o != quorum.TimedOut {
		t.Fatalf("cluster 0 for a key on its stalled shard: %v, want Pending or TimedOut", o)
	}
	time.Sleep(nt + nt/2) // the stalled shard's breaker opens
	if err := lkA.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// Again on the stalled shard's slots: refused at once there (its
	// release is deferred; clusters 1 and 2 released theirs).
	lkA3, err := l.TryLock(t.Context(), a)
	if err != nil {
		t.Fatalf("TryLock again on the stalled shard's slots: %v", err)
	}
	if o := lkA3.Acquisition().Masters[0].Outcome; o != quorum.Unavailable {
		t.Fatalf("cluster 0 for a key on its stalled shard, breaker open: %v, want Unavailable", o)
	}
	// Healthy shards of cluster 0: never unavailable, and the key is there.
	ok := 0
	for n := range 10 {
		r := healthy[n%2]
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatalf("TryLock %s on a healthy shard: %v", r, err)
		}
		switch o := lk.Acquisition().Masters[0].Outcome; o {
		case quorum.OK:
			ok++
		case quorum.Pending: // decided by 1 and 2 first: the key must still land
		default:
			t.Fatalf("cluster 0 for %s on a healthy shard while shard %d is stalled: %v", r, sA, o)
		}
		deadline := time.Now().Add(5 * time.Second)
		for held(t, 0, r) != lk.Token() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: cluster 0's healthy shard never got the key", r)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if ok == 0 {
		t.Fatalf("cluster 0 answered OK for none of 10 locks on its healthy shards")
	}
	st := l.Stats()[0]
	if !st.Skipped || len(st.Shards) != 3 || st.Deferred < 1 {
		t.Fatalf("Stats()[0] = %+v; want Skipped, 3 shards, a deferred release", st)
	}
	for _, sh := range st.Shards {
		if want := sh.Addr == cl.Addrs(0)[sA]; sh.Skipped != want {
			t.Errorf("shard %s: Skipped %v, want %v", sh.Addr, sh.Skipped, want)
		}
	}
	if err := lkA3.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Resume: the deferred releases run after the SET they follow.
	if err := cl.Resume(0, sA); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for held(t, 0, a) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("cluster 0 still holds %q after the resume", held(t, 0, a))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lk, err := l.TryLock(t.Context(), a); err != nil || lk.Acquisition().Masters[0].Outcome == quorum.Unavailable {
		t.Fatalf("after the resume: %v", err)
	} else {
		lk.Unlock(t.Context())
	}
}

// With Options.ViaClient the cluster clients are used as they are (the
// plain path): locks and fences work, keys land on the owning shards; but
// one stream serves the whole cluster, so a stalled shard makes every key
// see that cluster as not answering.
func TestViaClientPlainPath(t *testing.T) {
	clients := make([]redis.UniversalClient, cl.N())
	for i := range clients {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(i), ReadTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	const nt = 300 * time.Millisecond
	l, err := redlock.New(clients, &redlock.Options{ViaClient: true, Fencing: true, MasterTimeout: nt})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last uint64
	for s := range cl.Shards() {
		r := resourceOn("via", s)
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if lk.Fence() <= last {
			t.Fatalf("fence %d after %d", lk.Fence(), last)
		}
		for i := range cl.N() {
			if lk.Acquisition().Masters[i].Outcome != quorum.OK {
				continue // decided without it
			}
			if v := held(t, i, r); v != lk.Token() {
				t.Fatalf("cluster %d: %q, want our token", i, v)
			}
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if left := lockKeysLeft(t, r, redlock.DefaultTTL/2); len(left) > 0 {
			t.Fatalf("left after Unlock: %v", left)
		}
	}
	if st := l.Stats()[0]; st.Shards != nil {
		t.Fatalf("plain path Stats()[0].Shards = %v, want nil", st.Shards)
	}
	// No per-shard isolation: stall shard 1 of cluster 0, then a key on
	// shard 0 sees cluster 0 as unavailable too.
	if err := cl.Pause(0, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.ResumeAll)
	lk, err := l.TryLock(t.Context(), resourceOn("via-stalled", 1))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(nt + nt/2)
	other, err := l.TryLock(t.Context(), resourceOn("via-healthy", 0))
	if err != nil {
		t.Fatal(err)
	}
	if o := other.Acquisition().Masters[0].Outcome; o != quorum.Unavailable {
		t.Fatalf("plain path, healthy shard of cluster 0 behind a stalled one: %v, want Unavailable", o)
	}
	if err := cl.Resume(0, 1); err != nil {
		t.Fatal(err)
	}
	lk.Unlock(t.Context())
	other.Unlock(t.Context())
}

// Two masters that are the same cluster (two clients, or a cluster client
// and a plain client to one of its nodes) are not independent: the first
// operation fails with ErrInvalid.
func TestSameClusterTwiceIsInvalid(t *testing.T) {
	for name, second := range map[string]func() redis.UniversalClient{
		"cluster client": func() redis.UniversalClient { return cl.Clients()[0] },
		"node client": func() redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: cl.Addrs(0)[2]})
			t.Cleanup(func() { c.Close() })
			return c
		},
	} {
		cs := cl.Clients()
		cs[1] = second()
		l, err := redlock.New(cs, &redlock.Options{MasterTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: New: %v", name, err)
		}
		r := resourceOn("dup-"+strings.ReplaceAll(name, " ", ""), 2) // on the shared node
		_, err = l.TryLock(t.Context(), r)
		l.Close()
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Fatalf("%s: TryLock: %v, want ErrInvalid", name, err)
		}
	}
}

// The slot table of a cluster master comes from the cluster: keys of
// every shard land on their shard, checked by asking each node.
func TestKeysLandOnTheirShard(t *testing.T) {
	l := newLocker(t, &redlock.Options{MasterTimeout: 500 * time.Millisecond})
	var names []string
	for n := range 30 {
		names = append(names, fmt.Sprintf("land-%d", n))
	}
	slices.Sort(names)
	for _, r := range names {
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cl.N() {
			if o := lk.Acquisition().Masters[i].Outcome; o != quorum.OK {
				continue // decided without it: its key may still be on the way
			}
			if v := held(t, i, r); v != lk.Token() {
				t.Fatalf("%s: cluster %d shard %d holds %q", r, i, cl.ShardOf(lockKey(r)), v)
			}
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A MOVED reply fails its command on that master (it is not retried on
// another node) and has the slot table fetched again: here the first table
// (ClusterOptions.ClusterSlots) has shards 0 and 1 swapped; the next
// tables are the cluster's own.
func TestMovedRefreshesTheSlotTable(t *testing.T) {
	var calls atomic.Int32
	truth := cl.Node(0, 0)
	swapped := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(0), ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) {
		slots, err := truth.ClusterSlots(ctx).Result()
		if err != nil || calls.Add(1) > 1 {
			return slots, err
		}
		slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
		slots[0].Nodes, slots[1].Nodes = slots[1].Nodes, slots[0].Nodes
		return slots, nil
	}})
	t.Cleanup(func() { swapped.Close() })
	cs := cl.Clients()
	cs[0] = swapped
	l, err := redlock.New(cs, &redlock.Options{MasterTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := resourceOn("moved", 0)
	lk, err := l.TryLock(t.Context(), r)
	if err != nil {
		t.Fatal(err) // clusters 1 and 2
	}
	n0 := lk.Acquisition().Masters[0]
	if n0.Outcome != quorum.Failed || n0.Err == nil || !strings.Contains(n0.Err.Error(), "MOVED") {
		t.Fatalf("cluster 0 with a wrong slot table: %v, %v; want Failed with MOVED", n0.Outcome, n0.Err)
	}
	if v := held(t, 0, r); v != "" {
		t.Fatalf("cluster 0 holds %q after a MOVED", v)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		lk, err := l.TryLock(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		o := lk.Acquisition().Masters[0].Outcome
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if o == quorum.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster 0 still %v 5 s after a MOVED (slot table fetched %d times)", o, calls.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := calls.Load(); n < 2 {
		t.Fatalf("slot table fetched %d times, want a refresh after the MOVED", n)
	}
	if left := lockKeysLeft(t, "moved", redlock.DefaultTTL/2); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

// A lock on several resources needs their keys in one slot on a cluster
// master: a set across slots is refused before anything is sent; a set
// sharing a hash tag (RedsyncKeys takes keys as given) is locked on the
// shard that owns the slot, and released.
func TestLockAllOnClusters(t *testing.T) {
	l := newLocker(t, nil)
	a, b := resourceOn("multi-a", 0), resourceOn("multi-b", 1)
	lk, err := l.TryLockAll(t.Context(), []string{a, b})
	if !errors.Is(err, redlock.ErrInvalid) || lk != nil || !strings.Contains(err.Error(), "different slots") {
		t.Fatalf("TryLockAll across slots: %v, %v; want ErrInvalid naming the slots", lk, err)
	}
	if got := lockKeysEverywhere(t, "multi-"); len(got) > 0 {
		t.Fatalf("keys after a refused set: %v", got)
	}

	rk := newLocker(t, &redlock.Options{RedsyncKeys: true, KeyPrefix: "tagged:"})
	set := []string{"{order7}:a", "{order7}:b"}
	lk, err = rk.TryLockAll(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	shard := cl.ShardOf("tagged:{order7}:a")
	for i := range cl.N() {
		if o := lk.Acquisition().Masters[i].Outcome; o != quorum.OK {
			continue // decided without it: its keys may still be on the way
		}
		for _, r := range set {
			v, err := cl.Node(i, shard).Get(t.Context(), "tagged:"+r).Result()
			if err != nil || v != lk.Token() {
				t.Errorf("cluster %d shard %d: %s = %q, %v; want the token", i, shard, r, v, err)
			}
		}
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range cl.N() {
		// Unlock waits for each cluster up to MasterTimeout; one that took
		// longer still gets the release on its stream.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := cl.Node(i, shard).Exists(t.Context(), "tagged:{order7}:a", "tagged:{order7}:b").Result()
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster %d: %d keys left 5s after Unlock (%v)", i, n, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// The release's announcement reaches a waiter on cluster masters too
// (PUBLISH inside the script is broadcast to the whole cluster).
func TestReleaseWakesWaiterOnClusters(t *testing.T) {
	holder := newLocker(t, nil)
	waiter := newLocker(t, &redlock.Options{Retry: redlock.RetryPolicy{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second}})
	r := resourceOn("wake", 2)
	lk, err := holder.TryLock(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		if lk, err := waiter.Lock(t.Context(), r); err == nil {
			got <- time.Now()
			lk.Unlock(context.WithoutCancel(t.Context()))
		}
	}()
	// Subscribed on every cluster (any node answers PUBSUB NUMSUB for the
	// channels of its own client connections: ask them all).
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs := 0
		for i := range cl.N() {
			for s := range cl.Shards() {
				n, err := cl.Node(i, s).PubSubNumSub(t.Context(), lockKey(r)).Result()
				if err == nil && n[lockKey(r)] > 0 {
					subs++
					break
				}
			}
		}
		if subs == cl.N() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter is subscribed on %d of %d clusters", subs, cl.N())
		}
		time.Sleep(5 * time.Millisecond)
	}
	released := time.Now()
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > 2*time.Second {
			t.Fatalf("the waiter acquired %v after the release: not woken (its backoff is ≥ 2.5s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
}
