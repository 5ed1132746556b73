package redlock

import (
	"fmt"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A Lock keeps its acquisition's per-master results compactly (no
// allocation) for up to compactNodes masters, boxed beyond, and unpacks
// the same results either way. (make mutate's fast set: a mutant that
// boxed the record at exactly compactNodes masters lived.)
func TestMutateRecordCompactUpToItsSize(t *testing.T) {
	for _, n := range []int{1, 5, compactNodes, compactNodes + 1} {
		addrs := make([]string, n)
		info := Acquisition{Masters: make([]MasterResult, n)}
		for i := range addrs {
			addrs[i] = fmt.Sprintf("m%d:6379", i)
			info.Masters[i] = MasterResult{Addr: addrs[i], Outcome: quorum.Outcome(1 + i%3), Latency: time.Duration(i+1) * time.Millisecond}
		}
		l := &Locker{addrs: addrs, env: sysEnv{}}
		a := l.pack(info)
		if compact := a.n != 0; compact != (n <= compactNodes) {
			t.Errorf("%d masters: compact %v, want %v", n, compact, n <= compactNodes)
		}
		got := a.unpack(addrs)
		for i := range addrs {
			if got.Masters[i].Outcome != info.Masters[i].Outcome || got.Masters[i].Latency != info.Masters[i].Latency || got.Masters[i].Addr != addrs[i] {
				t.Errorf("%d masters: master %d unpacked as %+v, want %+v", n, i, got.Masters[i], info.Masters[i])
			}
		}
	}
}
