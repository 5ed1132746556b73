package world_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
)

// BenchmarkSection is one critical section of the fixture (a round of SET
// NX PX on five masters counted by quorum.Round, a hold, a release by
// EVALSHA on each) in the world, all costs in: the world's events, the
// masters' commands and the fixture's own work. Eight clients on five
// masters: uncontended, each alone on its resource (with pubsub, each
// also hears every release of every resource on every master: 40
// messages a section); contended, all on one resource, where the
// fixture's TryLock loop (no queue: every release heard sets every
// waiter retrying) spends most events on failed rounds; chaos, two
// resources under the inside row's faults. One op is one section;
// events/section, allocs/event and the CPU time per section (user and
// system, GC included: the machine is shared, so wall time overstates)
// come beside it. A world runs 10 s of
// simulated time and the next one starts (its setup is in the cost).
func BenchmarkSection(b *testing.B) {
	for _, bc := range []struct {
		name  string
		tweak func(*row)
	}{
		{"uncontended", func(r *row) {
			r.chaos = nil
			r.cfg.own, r.cfg.subscribe = true, false
			r.cfg.resources = []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"}
		}},
		{"uncontended-pubsub", func(r *row) {
			r.chaos = nil
			r.cfg.own = true
			r.cfg.resources = []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"}
		}},
		{"contended", func(r *row) { r.chaos = nil; r.cfg.resources = []string{"{a}"} }},
		{"chaos", func(*row) {}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := insideRow(1)
			r.length = 10 * time.Second
			bc.tweak(&r)
			srcs, scripts := loadScripts(b)
			r.opts.Scripts = scripts
			cfg := r.cfg
			cfg.releaseSHA, cfg.releaseSrc = scripts.SHA("release.lua"), srcs["release.lua"]
			seed := uint64(0)
			fresh := func() *world.World {
				seed++
				r.opts.Seed = seed
				w, err := world.New(r.opts)
				if err != nil {
					b.Fatal(err)
				}
				for i := range r.clients {
					w.Add(newTryLocker(&cfg, i, w.Rand()))
				}
				if r.chaos != nil {
					if err := w.Chaos(0, r.length, *r.chaos); err != nil {
						b.Fatal(err)
					}
				}
				return w
			}
			w := fresh()
			var events uint64
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			cpu0 := cpuTime()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for w.Sections() == n {
					if w.Now() > r.length || !w.Step() {
						events += w.Events()
						w, n = fresh(), 0
					}
				}
				n++
			}
			events += w.Events()
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/section")
				b.ReportMetric(float64(b.N)/(cpu.Minutes()), "sections/cpu-min")
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(events)/float64(b.N), "events/section")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(events), "allocs/event")
		})
	}
}

// pinger keeps depth PINGs in flight on each master: the world's own cost
// per event, with the cheapest command and a client that does nothing.
type pinger struct {
	masters, depth int
	out            []world.Action
	args           []string
}

func (p *pinger) Start(time.Duration) []world.Action {
	p.out = p.out[:0]
	for m := range p.masters {
		for range p.depth {
			p.out = append(p.out, world.Action{Kind: world.Send, Master: m, Args: p.args})
		}
	}
	return p.out
}

func (p *pinger) Reply(_ time.Duration, m int, _ uint64, _ sim.Reply) []world.Action {
	p.out = append(p.out[:0], world.Action{Kind: world.Send, Master: m, Args: p.args})
	return p.out
}
func (p *pinger) Lost(time.Duration, int, uint64) []world.Action             { return nil }
func (p *pinger) Message(time.Duration, int, string, string) []world.Action  { return nil }
func (p *pinger) Subscribed(time.Duration, int, string, bool) []world.Action { return nil }
func (p *pinger) Resubscribe(time.Duration, int) []world.Action              { return nil }
func (p *pinger) Timer(time.Duration, uint64) []world.Action                 { return nil }
func (p *pinger) Stop(time.Duration) []world.Action                          { return nil }

// BenchmarkEvent is one event of the world (a command's arrival at a
// master, or its reply's at the client): 8 clients keep 4 PINGs in flight
// on each of 5 masters.
func BenchmarkEvent(b *testing.B) {
	w, err := world.New(world.Options{Seed: 1, Masters: 5})
	if err != nil {
		b.Fatal(err)
	}
	for range 8 {
		w.Add(&pinger{masters: 5, depth: 4, args: []string{"PING"}})
	}
	for range 1000 { // grow the heap and the pipes
		w.Step()
	}
	b.ReportAllocs()
	for b.Loop() {
		w.Step()
	}
}
