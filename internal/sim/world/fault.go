package world

import (
	"fmt"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// FaultKind is a kind of fault.
type FaultKind uint8

// The faults.
const (
	_ FaultKind = iota
	// StallConn: Client's command connection to Master delivers nothing,
	// either way, until it ends; then everything comes, in order.
	StallConn
	// CutConn: Client's command connection to Master breaks: commands in
	// flight or queued, and replies on their way back, are lost (Lost),
	// and so is every command sent until it ends.
	CutConn
	// CutPubSub: Client's pub/sub connection to Master breaks: its
	// subscriptions and the messages on their way are lost; when it ends
	// the client is told (Resubscribe).
	CutPubSub
	// StallMaster: Master's process pauses: commands queue at it, in the
	// order they came, and run when it ends; nothing is answered
	// meanwhile (its keys still expire on its clock, which runs on).
	StallMaster
	// RestartMaster: Master goes down for For, then comes back (Keep:
	// with its keyspace; else empty): every connection to it breaks, its
	// script cache and subscriptions are gone (sim.Master.Restart).
	RestartMaster
	// PauseClient: Client's process pauses: nothing is delivered to it
	// (replies, messages, timers) until it ends; then all of it, in
	// order.
	PauseClient
)

var faultNames = [...]string{"", "StallConn", "CutConn", "CutPubSub", "StallMaster", "RestartMaster", "PauseClient"}

// String returns the kind's name, e.g. "CutConn".
func (k FaultKind) String() string {
	if int(k) < len(faultNames) {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", uint8(k))
}

// Fault is one fault: Kind, on Client and Master (as the kind uses them),
// from At for For.
type Fault struct {
	Kind           FaultKind
	Client, Master int
	At, For        time.Duration
	Keep           bool
}

// String describes f with the fields its kind uses.
func (f Fault) String() string {
	switch f.Kind {
	case StallConn, CutConn, CutPubSub:
		return fmt.Sprintf("%v client %d master %d at %v for %v", f.Kind, f.Client, f.Master, f.At, f.For)
	case StallMaster:
		return fmt.Sprintf("%v master %d at %v for %v", f.Kind, f.Master, f.At, f.For)
	case RestartMaster:
		return fmt.Sprintf("%v master %d at %v for %v keep %v", f.Kind, f.Master, f.At, f.For, f.Keep)
	}
	return fmt.Sprintf("%v client %d at %v for %v", f.Kind, f.Client, f.At, f.For)
}

// Inject schedules f (at the current time if f.At is past).
func (w *World) Inject(f Fault) error {
	usesClient := f.Kind != StallMaster && f.Kind != RestartMaster
	usesMaster := f.Kind != PauseClient
	switch {
	case f.Kind < StallConn || f.Kind > PauseClient:
		return fmt.Errorf("world: no fault of kind %d", f.Kind)
	case usesClient && (f.Client < 0 || f.Client >= len(w.clients)):
		return fmt.Errorf("world: %v: no client %d", f.Kind, f.Client)
	case usesMaster && (f.Master < 0 || f.Master >= len(w.masters)):
		return fmt.Errorf("world: %v: no master %d", f.Kind, f.Master)
	case f.For < 0:
		return fmt.Errorf("world: %v for %v", f.Kind, f.For)
	}
	if a := w.opts.Assume; a.TTL > 0 {
		down := a.TTL + time.Duration(float64(a.TTL)*a.DriftFactor)
		switch {
		case f.Kind == RestartMaster && !f.Keep && f.For < down && !w.opts.Outside.RestartEmptyAtOnce:
			return fmt.Errorf("world: %v: a master restarted empty must stay down %v (TTL × (1 + DriftFactor)); Outside.RestartEmptyAtOnce for a run that means not to", f, down)
		case f.Kind == PauseClient && !w.opts.Outside.PausePastMargin && w.pauseWith(f) > a.SafetyMargin:
			return fmt.Errorf("world: %v: longer than the SafetyMargin %v, alone or with the client's pauses it overlaps; Outside.PausePastMargin for a run that means to", f, a.SafetyMargin)
		}
	}
	f.At = max(f.At, w.now)
	w.faults = append(w.faults, f)
	w.active = append(w.active, false)
	w.schedule(event{at: f.At, kind: evFault, x: int32(len(w.faults) - 1)})
	return nil
}

// pauseWith is how long f's client stays paused, f with the pauses of
// that client it overlaps (and those they overlap): one pause, to the
// process.
func (w *World) pauseWith(f Fault) time.Duration {
	from, to := f.At, f.At+f.For
	for grew := true; grew; {
		grew = false
		for _, g := range w.faults {
			if g.Kind != PauseClient || g.Client != f.Client || g.At > to || g.At+g.For < from {
				continue
			}
			if g.At < from || g.At+g.For > to {
				from, to, grew = min(from, g.At), max(to, g.At+g.For), true
			}
		}
	}
	return to - from
}

func (w *World) begin(i int) {
	f := w.faults[i]
	w.active[i] = true
	w.mixEvent(evFault, i, uint64(f.Kind))
	if w.opts.Trace {
		w.trace = append(w.trace, TraceEvent{At: w.now, What: "fault " + f.String(), Client: f.Client, Master: f.Master})
	}
	x := f.Client*len(w.masters) + f.Master
	switch f.Kind {
	case StallConn:
		w.pairs[x].stalled++
	case CutConn:
		w.pairs[x].cut++
		w.cutCmd(x)
	case CutPubSub:
		w.pairs[x].subCut++
		w.cutSub(x, true)
	case StallMaster:
		w.masters[f.Master].stalled++
	case RestartMaster:
		m := &w.masters[f.Master]
		m.down++
		m.m.Restart(f.Keep)
		for c := range w.clients {
			x := c*len(w.masters) + f.Master
			w.cutCmd(x)
			w.cutSub(x, false)
		}
	case PauseClient:
		w.clients[f.Client].paused++
	}
	w.schedule(event{at: w.now + f.For, kind: evHeal, x: int32(i)})
}

func (w *World) heal(i int) {
	f := w.faults[i]
	w.active[i] = false
	w.mixEvent(evHeal, i, uint64(f.Kind))
	if w.opts.Trace {
		w.trace = append(w.trace, TraceEvent{At: w.now, What: "heal " + f.Kind.String(), Client: f.Client, Master: f.Master})
	}
	x := f.Client*len(w.masters) + f.Master
	switch f.Kind {
	case StallConn:
		p := &w.pairs[x]
		if p.stalled--; p.stalled == 0 {
			w.arm(x, famReq)
			w.arm(x, famRep)
		}
	case CutConn:
		w.pairs[x].cut--
	case CutPubSub:
		p := &w.pairs[x]
		if p.subCut--; p.subCut == 0 {
			w.schedule(event{at: w.now, kind: evResub, x: int32(x)})
		}
	case StallMaster:
		m := &w.masters[f.Master]
		if m.stalled--; m.stalled == 0 {
			// In the order the commands came to the stalled process.
			for _, x := range m.waiting {
				if p := &w.pairs[x]; p.parked {
					p.parked = false
					w.arm(x, famReq)
				}
			}
			m.waiting = m.waiting[:0]
		}
	case RestartMaster:
		m := &w.masters[f.Master]
		if m.down--; m.down == 0 {
			for c := range w.clients {
				w.schedule(event{at: w.now, kind: evResub, x: int32(c*len(w.masters) + f.Master)})
			}
		}
	case PauseClient:
		cl := &w.clients[f.Client]
		if cl.paused--; cl.paused == 0 {
			ds := cl.deferred
			cl.deferred = nil
			for _, d := range ds {
				w.deliver(f.Client, d)
			}
		}
	}
	switch f.Kind {
	case StallConn, CutConn:
		w.hist.Outages = append(w.hist.Outages, Outage{Client: f.Client, Master: f.Master, From: f.At, To: w.now})
	case StallMaster, RestartMaster:
		w.hist.Outages = append(w.hist.Outages, Outage{Client: -1, Master: f.Master, From: f.At, To: w.now})
	case PauseClient:
		w.hist.Outages = append(w.hist.Outages, Outage{Client: f.Client, Master: -1, From: f.At, To: w.now})
	}
}

// cutCmd breaks a command connection: what was on its way is lost, the
// replies' commands first (they were sent first).
func (w *World) cutCmd(x int) {
	p := &w.pairs[x]
	lose := func(tag uint64) { w.lose(x, tag) }
	p.rep.cut(lose)
	p.req.cut(lose)
	p.parked = false
}

// cutSub breaks a pub/sub connection (disconnect: the master learns of
// it; a restarting master has forgotten every subscription already).
func (w *World) cutSub(x int, disconnect bool) {
	p := &w.pairs[x]
	if disconnect {
		w.masters[p.m].m.Disconnect(sim.Conn(p.c + 1))
	}
	p.sub.cut(nil)
	p.msg.cut(nil)
}

// Chaos is a random schedule of faults (World.Chaos draws it).
type Chaos struct {
	// Every is the mean time between two faults' starts (exponential).
	Every time.Duration
	// Kinds are the faults drawn from, each as likely.
	Kinds []FaultKind
	// For is how long a fault lasts.
	For Dist
	// Keep is the chance that a restart keeps the keyspace.
	Keep float64
	// EmptyDown is how long, at least, a master restarted empty stays
	// down: assumption 2 asks for a TTL (times the drift). A run outside
	// the assumptions sets it to 0 (the master is back at once).
	EmptyDown time.Duration
}

// Chaos draws faults from ch between from and until and schedules them,
// on the clients added so far.
func (w *World) Chaos(from, until time.Duration, ch Chaos) error {
	if ch.Every <= 0 || len(ch.Kinds) == 0 || !ch.For.valid() {
		return fmt.Errorf("world: chaos needs Every > 0, kinds and a valid For: %+v", ch)
	}
	for t := from + time.Duration(w.rng.ExpFloat64()*float64(ch.Every)); t < until; t += time.Duration(w.rng.ExpFloat64() * float64(ch.Every)) {
		f := Fault{Kind: ch.Kinds[w.rng.IntN(len(ch.Kinds))], At: t, For: ch.For.draw(w.rng),
			Master: w.rng.IntN(len(w.masters))}
		if len(w.clients) > 0 {
			f.Client = w.rng.IntN(len(w.clients))
		}
		if f.Kind == RestartMaster {
			f.Keep = w.rng.Float64() < ch.Keep
			if !f.Keep {
				f.For = max(f.For, ch.EmptyDown)
			}
		}
		if a := w.opts.Assume; f.Kind == PauseClient && a.TTL > 0 && !w.opts.Outside.PausePastMargin && w.pauseWith(f) > a.SafetyMargin {
			continue // with the client's pauses it overlaps, one past the margin
		}
		if err := w.Inject(f); err != nil {
			return err
		}
	}
	return nil
}
