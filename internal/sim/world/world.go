package world

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// Dist is a distribution of delays: Min plus an exponential draw of mean
// Mean − Min, cut at Max. Most messages come quickly; a few take long.
type Dist struct {
	Min, Mean, Max time.Duration
	// Tail is the chance that a draw is uniform on [Mean, Max] instead: a
	// heavy tail (a GC pause, a congested link) that reaches Max as often
	// as it reaches Mean. Zero: none, and no draw for it.
	Tail float64
}

func (d Dist) draw(r *rand.Rand) time.Duration {
	if d.Tail > 0 && r.Float64() < d.Tail {
		return d.Mean + time.Duration(r.Int64N(int64(d.Max-d.Mean)+1))
	}
	x := d.Min + time.Duration(r.ExpFloat64()*float64(d.Mean-d.Min))
	return min(x, d.Max)
}

func (d Dist) valid() bool {
	return 0 <= d.Min && d.Min <= d.Mean && d.Mean <= d.Max && 0 <= d.Tail && d.Tail <= 1
}

// Options configure a World. Zero fields take the documented defaults.
type Options struct {
	// Seed is the one source of every choice the world and its clients
	// make.
	Seed uint64
	// Masters is how many masters. Default: 5.
	Masters int
	// Scripts are the masters' script models (sim.NewScripts). Default:
	// none (EVALSHA of a loaded script then fails).
	Scripts *sim.Scripts
	// Delay is the one-way delay of a command or a reply. Default:
	// {Min 50µs, Mean 150µs, Max 5ms}.
	Delay Dist
	// PubSubDelay is the delay of a pub/sub message. Default: Delay.
	PubSubDelay Dist
	// PubSubLoss and PubSubDup are the chances that a pub/sub message is
	// lost, and (if not) that it comes twice. Default: 0.
	PubSubLoss, PubSubDup float64
	// Drift bounds every clock's rate: each process's clock runs at a
	// rate drawn uniformly from [1 − Drift, 1 + Drift], to the part per
	// million. Default: 0.0005. A run outside the assumptions sets it
	// above the clients' DriftFactor.
	Drift float64
	// Offset bounds every clock's offset: drawn uniformly from
	// [−Offset, Offset], plus Epoch, for a master and a client alike.
	// Default: 1h.
	Offset time.Duration
	// Epoch is added to every clock, so that TIME and PXAT see a
	// plausible Unix time, and a client's wall clock reads near the
	// masters'. Default: 1 800 000 000 s.
	Epoch time.Duration
	// Trace keeps every event for TraceAround (costly: a failing seed is
	// replayed with it).
	Trace bool
	// Assume is what the clients assume; with it set, the world refuses a
	// fault or a drift that breaks it unless Outside says the run breaks
	// it on purpose. Zero: nothing is checked.
	Assume Assumptions
	// Outside lists the assumptions the run breaks on purpose.
	Outside Outside
}

// Assumptions are what the library's safety rests on (docs/design.md §3),
// in the clients' own terms.
type Assumptions struct {
	// TTL is the longest lease a client takes.
	TTL time.Duration
	// DriftFactor is the clients' budget's: a master's clock runs at a
	// rate within DriftFactor of a client's.
	DriftFactor float64
	// SafetyMargin is the longest a holder may pause between checking its
	// deadline and acting.
	SafetyMargin time.Duration
}

// Outside names the assumptions a run breaks on purpose: a run that
// breaks one must show a violation, one that keeps all must show none.
type Outside struct {
	// RestartEmptyAtOnce (assumption 2): a master restarted empty may come
	// back before TTL × (1 + DriftFactor) has passed.
	RestartEmptyAtOnce bool
	// DriftBeyond (assumption 3): two clocks may differ in rate by more
	// than DriftFactor: (1 + Drift) / (1 − Drift) > 1 + DriftFactor.
	DriftBeyond bool
	// PausePastMargin (assumption 4): a client may pause for longer than
	// SafetyMargin.
	PausePastMargin bool
}

func (o *Options) fill() error {
	if o.Masters == 0 {
		o.Masters = 5
	}
	if o.Delay == (Dist{}) {
		o.Delay = Dist{Min: 50 * time.Microsecond, Mean: 150 * time.Microsecond, Max: 5 * time.Millisecond}
	}
	if o.PubSubDelay == (Dist{}) {
		o.PubSubDelay = o.Delay
	}
	if o.Drift == 0 {
		o.Drift = 0.0005
	}
	if o.Offset == 0 {
		o.Offset = time.Hour
	}
	if o.Epoch == 0 {
		o.Epoch = 1_800_000_000 * time.Second
	}
	switch {
	case o.Masters < 1:
		return fmt.Errorf("world: %d masters", o.Masters)
	case !o.Delay.valid() || !o.PubSubDelay.valid():
		return fmt.Errorf("world: a delay needs 0 ≤ Min ≤ Mean ≤ Max: %+v, %+v", o.Delay, o.PubSubDelay)
	case o.Drift < 0 || o.Drift >= 0.5:
		return fmt.Errorf("world: Drift %v outside [0, 0.5)", o.Drift)
	case o.PubSubLoss < 0 || o.PubSubLoss > 1 || o.PubSubDup < 0 || o.PubSubDup > 1:
		return fmt.Errorf("world: pub/sub loss %v and duplication %v must be chances", o.PubSubLoss, o.PubSubDup)
	case o.Offset < 0:
		return fmt.Errorf("world: Offset %v is negative", o.Offset)
	case o.Offset > o.Epoch:
		// A clock reads Epoch ± Offset: a client's reading, its
		// monotonic clock too, must not go below 0.
		return fmt.Errorf("world: Offset %v is beyond Epoch %v", o.Offset, o.Epoch)
	case o.Assume.TTL > 0 && !o.Outside.DriftBeyond && (1+o.Drift)/(1-o.Drift) > 1+o.Assume.DriftFactor:
		return fmt.Errorf("world: Drift %v lets two clocks differ in rate by more than the DriftFactor %v assumed (Outside.DriftBeyond for a run that means to)",
			o.Drift, o.Assume.DriftFactor)
	}
	return nil
}

// World is a deterministic simulation of clients and masters on one
// global clock. It runs on the caller's goroutine, one event at a time;
// it is not safe for concurrent use.
type World struct {
	opts Options
	rng  *rand.Rand
	now  time.Duration
	seq  uint64
	heap []event
	hash uint64
	n    uint64 // events handled

	masters []master
	clients []client
	pairs   []pair // client c, master m: pairs[c*len(masters)+m]
	faults  []Fault
	active  []bool // faults[i] has begun and not ended

	hist  History
	open  map[callKey]int // a held lock's interval, by (client, call)
	calls map[callKey]int // a call not yet returned
	// closing: a client whose Shutdown or Close returned, its Closing
	closing map[int]int
	trace   []TraceEvent
}

type callKey struct {
	client int
	call   uint64
}

type master struct {
	m       *sim.Master
	clk     clock
	stalled int   // faults stalling the process
	down    int   // restarts in progress
	waiting []int // pairs whose next command came while it stalled
}

type client struct {
	c        Client
	clk      clock
	paused   int
	deferred []delivery
	started  bool
}

// A pair is client c's two connections to master m: the command
// connection (commands one way, replies the other, both FIFO) and the
// pub/sub connection (subscriptions one way, messages the other).
type pair struct {
	c, m    int
	req     pipe[[]string] // commands, by tag
	rep     pipe[sim.Reply]
	sub     pipe[subOp]
	msg     pipe[sim.Message]
	stalled int // faults stalling the command connection
	cut     int // faults cutting the command connection
	subCut  int // faults cutting the pub/sub connection
	lost    []uint64
	spare   []uint64
	broken  bool // an evBroken is scheduled
	parked  bool // its next command came while the master stalled: in master.waiting
}

type subOp struct {
	channel string
	on      bool
}

// Options returns the world's options with their defaults filled in.
func (w *World) Options() Options { return w.opts }

// New returns a world of opts.Masters masters and no client yet.
func New(opts Options) (*World, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	w := &World{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		hash: fnvOffset, open: map[callKey]int{}, calls: map[callKey]int{}, closing: map[int]int{}}
	w.hist.Masters = opts.Masters
	for i := range opts.Masters {
		clk := w.drawClock()
		clk.offset += opts.Epoch
		w.masters = append(w.masters, master{m: sim.New(fmt.Sprintf("m%d", i), opts.Scripts), clk: clk})
	}
	return w, nil
}

func (w *World) drawClock() clock {
	ppm := int64(w.opts.Drift * 1e6)
	off := int64(w.opts.Offset)
	return clock{ppm: w.rng.Int64N(2*ppm+1) - ppm, offset: time.Duration(w.rng.Int64N(2*off+1) - off)}
}

// Rand is the world's one source of randomness, for its clients too.
func (w *World) Rand() *rand.Rand { return w.rng }

// Now is the global clock.
func (w *World) Now() time.Duration { return w.now }

// Hash is the FNV-64a hash of every event handled so far: what each
// master executed and answered, and what each client was told, with the
// global time. The same seed gives the same hash.
func (w *World) Hash() uint64 { return w.hash }

// Events is how many events the world has handled.
func (w *World) Events() uint64 { return w.n }

// Masters is how many masters; Master returns one, for inspection.
func (w *World) Masters() int { return len(w.masters) }

// Master returns master i.
func (w *World) Master(i int) *sim.Master { return w.masters[i].m }

// MasterNow is master i's clock now: the time its commands run at.
func (w *World) MasterNow(i int) time.Duration { return w.masters[i].clk.read(w.now) }

// Add adds a client, with a clock of its own, and delivers its Start at
// the current time; it returns the client's index.
func (w *World) Add(c Client) int {
	i := len(w.clients)
	clk := w.drawClock()
	// On the masters' epoch, as a host's clock would be: its wall
	// readings (a queue member's instant, join.lua) and the masters' TIME
	// then differ by the two offsets, within 2 × Offset.
	clk.offset += w.opts.Epoch
	w.clients = append(w.clients, client{c: c, clk: clk})
	for m := range w.masters {
		w.pairs = append(w.pairs, pair{c: i, m: m})
	}
	w.schedule(event{at: w.now, kind: evStart, x: int32(i)})
	return i
}

// Sections is how many critical sections have begun.
func (w *World) Sections() int { return len(w.hist.Intervals) }

// History returns what the run recorded so far (shared with the world:
// read it once the run is over).
func (w *World) History() History {
	h := w.hist
	h.End = w.now
	for i, f := range w.faults {
		if !w.active[i] {
			continue
		}
		h.Outages = slices.Clip(h.Outages)
		switch f.Kind {
		case StallConn, CutConn:
			h.Outages = append(h.Outages, Outage{Client: f.Client, Master: f.Master, From: f.At, To: Never})
		case StallMaster, RestartMaster:
			h.Outages = append(h.Outages, Outage{Client: -1, Master: f.Master, From: f.At, To: Never})
		case PauseClient:
			h.Outages = append(h.Outages, Outage{Client: f.Client, Master: -1, From: f.At, To: Never})
		}
	}
	return h
}

// Stop delivers Stop to every client now.
func (w *World) Stop() {
	for i := range w.clients {
		w.schedule(event{at: w.now, kind: evStop, x: int32(i)})
	}
}

// Run handles every event up to until, in order of time and, at the same
// time, of scheduling; the clock then reads until (or the last event's
// time, when until is Never).
func (w *World) Run(until time.Duration) {
	for len(w.heap) > 0 && w.heap[0].at <= until {
		w.step()
	}
	if until != Never && w.now < until {
		w.now = until
	}
}

// Step handles the next event; it reports false when none is left.
func (w *World) Step() bool {
	if len(w.heap) == 0 {
		return false
	}
	w.step()
	return true
}

// Drain runs until no event is left, or limit events have been handled (it
// then reports false: something keeps the world busy).
func (w *World) Drain(limit uint64) bool {
	for n := uint64(0); len(w.heap) > 0; n++ {
		if n == limit {
			return false
		}
		w.step()
	}
	return true
}

// Reachable reports whether client c can connect to master m now: its
// command connection is not cut and the master is not down. A client's
// dial reads it (a connection attempt to a master that is not there
// fails).
func (w *World) Reachable(c, m int) bool {
	return w.pairs[c*len(w.masters)+m].cut == 0 && w.masters[m].down == 0
}

// SubReachable is Reachable for c's pub/sub connection to m.
func (w *World) SubReachable(c, m int) bool {
	return w.pairs[c*len(w.masters)+m].subCut == 0 && w.masters[m].down == 0
}
