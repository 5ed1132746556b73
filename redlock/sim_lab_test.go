package redlock

import (
	"flag"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

// The fault lab's mix of faults (tests/chaos, the rows inside the
// assumptions on containers), in the simulator: episodes one after the
// other, each on one or two masters of five, drawn as the lab's
// schedule draws them from its TTL; between two, a gap of TTL/2 to
// 1.5 TTL. With keep, restarted masters keep their keyspace: fencing
// assumes that no master loses its counter (docs/design.md §5), which
// two episodes restarting two masters each empty can break.
//   - pause: the masters' processes stop (docker pause) for TTL/2 to
//     2.5 TTL;
//   - kill and delayed restart: the masters go down and come back empty
//     after 1.2 to 2.2 TTL;
//   - cut: every connection to the masters breaks, commands and pub/sub,
//     for TTL/2 to 2.5 TTL (docker network disconnect);
//   - and the case the lab's traces showed: two masters restart empty one
//     after the other while two others pause.
func simLabFaults(r *rand.Rand, span time.Duration, masters, clients int, ttl time.Duration, keep bool) []world.Fault {
	var out []world.Fault
	gap := func() time.Duration { return ttl/2 + time.Duration(r.Int64N(int64(ttl))) }
	pauseFor := func() time.Duration { return ttl/2 + time.Duration(r.Int64N(int64(2*ttl))) }
	downFor := func() time.Duration { return ttl + ttl/5 + time.Duration(r.Int64N(int64(ttl))) }
	for at := gap(); at < span; {
		ms := r.Perm(masters)[:1+r.IntN(2)]
		slices.Sort(ms)
		var dur time.Duration
		kind := r.IntN(4)
		if *simLabKind >= 0 {
			kind = *simLabKind
		}
		switch kind {
		case 0: // pause
			dur = pauseFor()
			for _, m := range ms {
				out = append(out, world.Fault{Kind: world.StallMaster, Master: m, At: at, For: dur})
			}
		case 1: // kill and delayed restart
			dur = downFor()
			for _, m := range ms {
				out = append(out, world.Fault{Kind: world.RestartMaster, Master: m, At: at, For: dur, Keep: keep})
			}
		case 2: // cut
			dur = pauseFor()
			for _, m := range ms {
				for c := range clients {
					out = append(out, world.Fault{Kind: world.CutConn, Client: c, Master: m, At: at, For: dur},
						world.Fault{Kind: world.CutPubSub, Client: c, Master: m, At: at, For: dur})
				}
			}
		case 3: // two restart in turn while two others pause
			ms = r.Perm(masters)[:4]
			d1, d2 := downFor(), downFor()
			dur = d1 + d2
			out = append(out,
				world.Fault{Kind: world.RestartMaster, Master: ms[0], At: at, For: d1, Keep: keep},
				world.Fault{Kind: world.RestartMaster, Master: ms[1], At: at + d1, For: d2, Keep: keep},
				world.Fault{Kind: world.StallMaster, Master: ms[2], At: at + d1/2, For: pauseFor()},
				world.Fault{Kind: world.StallMaster, Master: ms[3], At: at + d1/2, For: pauseFor()})
			for _, f := range out[len(out)-2:] {
				dur = max(dur, f.At-at+f.For)
			}
		}
		at += dur + gap()
	}
	return out
}

// simLab is the lab's workload: five processes, four resources, one
// caller each per resource, holds of up to 2 ms, a 500 ms TTL, a 50 ms
// MasterTimeout. The lab bounds a Lock call by 4 TTL; here 8 TTL, so that
// its liveness bound (2.015 s) can be judged.
func simLab(fenced bool) simConfig {
	return simConfig{opts: Options{TTL: 500 * time.Millisecond, MasterTimeout: 50 * time.Millisecond, Fencing: fenced},
		resources: []string{"r0", "r1", "r2", "r3"}, callers: 1, hold: 2 * time.Millisecond, think: time.Millisecond,
		limit: 4 * time.Second}
}

var simLabKind = flag.Int("sim.labkind", -1, "TestSimLab: only this kind of the lab's faults (0 pause, 1 kill and restart, 2 cut, 3 two restarts in turn while two pause; -1: all)")

var simLabSlow = flag.Duration("sim.slow", 0, "TestSimLab: print the calls that took longer")

var simLabSeeds = flag.Int("sim.lab", 0, "TestSimLab: run the lab rows over this many seeds and print their figures")

// TestSimLab runs the lab's rows, handed and fenced, over -sim.lab seeds
// and prints per row: sections, calls, failed calls, calls judged by the
// liveness checker and those over its bound, and the acquire times.
func TestSimLab(t *testing.T) {
	if *simLabSeeds == 0 {
		t.Skip("give -sim.lab N")
	}
	for _, row := range simRows() {
		if !strings.HasPrefix(row.name, "lab-") {
			continue
		}
		var sections, calls, failed, judged, over, slow int
		var waits []time.Duration
		for s := range uint64(*simLabSeeds) {
			r, w, err := runSimWorld(row, *simSeed+s, rowSpan(row), false)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.violations) > 0 {
				t.Errorf("%s seed %d: %v", row.name, *simSeed+s, r.violations)
			}
			sections += r.sections
			judged += r.judged
			over += r.liveness
			for _, c := range w.History().Calls {
				if c.End == world.Never || c.Limit == time.Nanosecond {
					continue
				}
				calls++
				if !c.Acquired {
					failed++
				}
				if !c.Acquired || c.End-c.Start > 4*row.cfg.opts.TTL {
					slow++ // past the lab's own bound on a Lock call
				}
				waits = append(waits, c.End-c.Start)
				if *simLabSlow > 0 && c.End-c.Start > *simLabSlow {
					t.Logf("%s seed %d: client %d call %d on %s from %v took %v (acquired %v)", row.name, *simSeed+s, c.Client, c.Call, c.Resource, c.Start, c.End-c.Start, c.Acquired)
				}
			}
		}
		slices.Sort(waits)
		q := func(p float64) time.Duration {
			if len(waits) == 0 {
				return 0
			}
			return waits[min(len(waits)-1, int(p*float64(len(waits))))]
		}
		t.Logf("%-14s %7d sections, %7d calls, %4d failed, %4d past 4 TTL (%.3f%% within), liveness %d of %d judged over the bound; wait p50 %v p99 %v p99.9 %v max %v",
			row.name, sections, calls, failed, slow, 100*float64(calls-slow)/float64(max(calls, 1)), over, judged,
			q(0.5), q(0.99), q(0.999), q(1))
	}
}
