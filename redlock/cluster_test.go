//go:build unix

package redlock_test

import (
	"fmt"
	"testing"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The Locker's slot function against the specification's values and
// against CLUSTER KEYSLOT on a real cluster node, lock and fence keys
// included.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":     0x31C3, // CRC-16/XMODEM check value
		"somekey":       11058,  // CLUSTER KEYSLOT documentation
		"foo{hash_tag}": 2515,
		"{hash_tag}":    2515,
	} {
		if got := redlock.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	cl := lab.ClustersForTest(t, 1, 1, nil)
	keys := []string{"", "{", "}", "{}", "{}x", "x{}{y}", "a{b", "a}b{c}", "{{x}}", "x{y}{z}", "\xff{\x00}", "résumé"}
	for n := range 200 {
		r := fmt.Sprintf("res-%d", n)
		keys = append(keys, r, redlock.DefaultKeyPrefix+"{"+r+"}", redlock.DefaultKeyPrefix+"{"+r+"}:fence")
	}
	for _, key := range keys {
		want, err := cl.Node(0, 0).ClusterKeySlot(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redlock.KeySlot(key); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
}
