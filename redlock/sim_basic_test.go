package redlock

import (
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

func TestSimSmoke(t *testing.T) {
	row := &simRow{name: "mutex", procs: 3, cfg: simConfig{
		opts:      Options{TTL: time.Second},
		resources: []string{"a", "b"}, callers: 2, hold: 5 * time.Millisecond, think: time.Millisecond,
	}, world: func(o *world.Options) { o.PubSubLoss, o.PubSubDup = 0.01, 0.01 }}
	r, err := runSim(row, 1, 2*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sections %d events %d hash %x violations %v", r.sections, r.events, r.hash, r.violations)
}

func TestSimSeeds(t *testing.T) {
	for _, row := range simRows() {
		for seed := uint64(1); seed <= 20; seed++ {
			r, err := runSim(row, seed, 2*time.Second, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.violations) > 0 {
				t.Errorf("%s seed %d: %d sections: %v", row.name, seed, r.sections, r.violations)
			}
		}
	}
}
