//go:build unix

package lab_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/redis/go-redis/v9"
)

// skipUnlessProcess skips where the tests run on the Docker backend:
// clusters run as local processes only.
func skipUnlessProcess(t *testing.T) {
	t.Helper()
	if b := lab.Backend(os.Getenv("REDLOCK_LAB_BACKEND")); b != "" && b != lab.Process {
		t.Skipf("clusters need the process backend (REDLOCK_LAB_BACKEND=%s)", b)
	}
}

func TestSlotKnownValues(t *testing.T) {
	// From the Redis Cluster specification (CRC16 check value 0x31C3) and
	// the CLUSTER KEYSLOT documentation.
	for key, want := range map[string]int{
		"123456789":     0x31C3,
		"somekey":       11058,
		"foo{hash_tag}": 2515,
		"{hash_tag}":    2515,
	} {
		if got := lab.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// slotEdgeKeys are hash-tag edge cases for comparing with the server.
var slotEdgeKeys = []string{"", "foo{}{bar}", "{}foo", "a{b", "a}b{", "{{bar}}", "foo{bar}{zap}",
	"redlock:{orders}", "redlock:{orders}:fence", "lock:{résumé}", "\xff{\x00}", "{", "}", "{}"}

func TestClusters(t *testing.T) {
	skipUnlessProcess(t)
	ctx := t.Context()
	cl := lab.ClustersForTest(t, 2, 3, nil)
	if cl.N() != 2 || cl.Shards() != 3 {
		t.Fatalf("N, Shards = %d, %d", cl.N(), cl.Shards())
	}
	// Slot agrees with the server on many keys, tags included.
	keys := slices.Clone(slotEdgeKeys)
	for k := range 300 {
		keys = append(keys, fmt.Sprintf("k%d{t%d}x", k, k%37), fmt.Sprintf("plain-%d", k))
	}
	for _, key := range keys {
		got, err := cl.Node(0, 0).ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != lab.Slot(key) {
			t.Fatalf("CLUSTER KEYSLOT %q = %d, lab.Slot = %d", key, got, lab.Slot(key))
		}
	}
	// Each cluster is its own: a key written through cluster 0 lands on
	// the shard ShardOf names, and nowhere in cluster 1.
	for s := range 3 {
		key := keyOnShard(cl, s)
		if err := cl.Client(0).Set(ctx, key, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		for o := range 3 {
			n, err := cl.Node(0, o).Exists(ctx, key).Result()
			if o == s && (err != nil || n != 1) {
				t.Errorf("key %q not on cluster 0 shard %d: %d, %v", key, s, n, err)
			}
			if o != s && (err == nil || !isMoved(err)) {
				t.Errorf("cluster 0 shard %d answers %d, %v for a key of shard %d; want MOVED", o, n, err, s)
			}
		}
		if n, err := cl.Client(1).Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Errorf("cluster 1 has %q: %d, %v", key, n, err)
		}
	}
	// Pause stops one shard only.
	if err := cl.Pause(1, 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.ResumeAll)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := cl.Node(1, 2).Ping(short).Err(); err == nil {
		t.Errorf("paused shard answered PING")
	}
	for s := range 2 {
		if err := cl.Node(1, s).Ping(ctx).Err(); err != nil {
			t.Errorf("shard %d of cluster 1: %v", s, err)
		}
		if err := cl.Client(1).Set(ctx, keyOnShard(cl, s), "v", time.Minute).Err(); err != nil {
			t.Errorf("set on healthy shard %d while shard 2 is paused: %v", s, err)
		}
	}
	if err := cl.Resume(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := cl.Node(1, 2).Ping(ctx).Err(); err != nil {
		t.Errorf("resumed shard: %v", err)
	}
	// Bad input is an error, not a panic.
	if err := cl.Pause(2, 0); err == nil {
		t.Error("Pause(2, 0) on 2 clusters: no error")
	}
	if err := cl.Pause(0, 3); err == nil {
		t.Error("Pause(0, 3) on 3 shards: no error")
	}
	if cl.Client(2) != nil || cl.Node(0, -1) != nil || cl.Addrs(5) != nil {
		t.Error("out-of-range accessors returned something")
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Pause(0, 0); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Pause after Close: %v", err)
	}
}

func TestStartClustersBadInput(t *testing.T) {
	for _, c := range []struct{ n, s int }{{0, 3}, {3, 0}, {-1, 1}, {1, 65}} {
		if _, err := lab.StartClusters(t.Context(), c.n, c.s, nil); err == nil {
			t.Errorf("StartClusters(%d, %d): no error", c.n, c.s)
		}
	}
	if _, err := lab.StartClusters(t.Context(), 1, 1, &lab.Options{Proxy: true}); err == nil {
		t.Error("StartClusters with Proxy: no error")
	}
	if _, err := lab.StartClusters(t.Context(), 1, 1, &lab.Options{Backend: lab.Docker}); err == nil {
		t.Error("StartClusters on Docker: no error")
	}
}

func keyOnShard(cl *lab.Clusters, s int) string {
	for k := 0; ; k++ {
		key := fmt.Sprintf("key-%d", k)
		if cl.ShardOf(key) == s {
			return key
		}
	}
}

func isMoved(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) > 5 && re.Error()[:5] == "MOVED"
}
