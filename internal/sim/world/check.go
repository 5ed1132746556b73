package world

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/validity"
)

// Violation is one thing a checker found wrong with a history.
type Violation struct {
	// Check names the checker: "exclusion", "fence", "done", "liveness",
	// "leftover", "reading".
	Check string
	// At is when it happened, on the global clock (for a trace around
	// it).
	At   time.Duration
	What string
}

// String renders v on one line (its What may span more).
func (v Violation) String() string { return fmt.Sprintf("%s at %v: %s", v.Check, v.At, v.What) }

// maxViolations bounds what one checker reports: the first ones say
// what broke.
const maxViolations = 20

// Exclusion checks, resource by resource, that the holders at every
// instant may hold together: each holder counts from Enter until End (the
// first of Exit, Deadline and Done: after its deadline a holder no longer
// counts on the lock, so it is not the lock's to exclude). Together, at
// most one Exclusive and nothing else; any number of Shared; at most
// permits Permit (0: the check for a mutex or a read-write lock).
// Intervals are half open: a holder may enter at the instant another's
// ends.
func Exclusion(ivs []Interval, permits int) []Violation {
	type point struct {
		at    time.Duration
		iv    int
		enter bool
	}
	pts := make([]point, 0, 2*len(ivs))
	for i := range ivs {
		if ivs[i].End() > ivs[i].Enter {
			pts = append(pts, point{ivs[i].Enter, i, true}, point{ivs[i].End(), i, false})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		return cmp.Or(strings.Compare(ivs[a.iv].Resource, ivs[b.iv].Resource), cmp.Compare(a.at, b.at),
			boolCmp(a.enter, b.enter), cmp.Compare(a.iv, b.iv))
	})
	var out []Violation
	var held []int // intervals holding now, on the current resource
	var count [3]int
	res := ""
	for _, p := range pts {
		iv := &ivs[p.iv]
		if iv.Resource != res {
			res, held, count = iv.Resource, held[:0], [3]int{}
		}
		if !p.enter {
			held = slices.DeleteFunc(held, func(i int) bool { return i == p.iv })
			count[iv.Mode]--
			continue
		}
		count[iv.Mode]++
		held = append(held, p.iv)
		bad := ""
		switch {
		case count[Exclusive] > 1 || count[Exclusive] == 1 && len(held) > 1:
			bad = "an exclusive holder with another"
		case permits > 0 && count[Permit] > permits:
			bad = fmt.Sprintf("%d permit holders of %d", count[Permit], permits)
		case permits == 0 && count[Permit] > 0:
			bad = "a permit with no permits allowed"
		}
		if bad != "" && len(out) < maxViolations {
			var b strings.Builder
			fmt.Fprintf(&b, "%q: %s:", res, bad)
			for _, h := range held {
				fmt.Fprintf(&b, "\n\t%v", ivs[h])
			}
			out = append(out, Violation{Check: "exclusion", At: p.at, What: b.String()})
		}
	}
	return out
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1 // an end before an enter at the same instant
	}
	return 1
}

// Fences checks, resource by resource, that fences strictly increase
// from holder to holder: a holder that entered after another stopped
// counting on the lock (its End) has a greater fence, and an Exclusive
// holder has a greater fence than every Exclusive holder that entered
// before it, even one still holding (two at once is Exclusion's
// violation; the later must still have the greater fence, so that the
// resource turns the earlier away). Intervals without a fence (0) are
// left out.
func Fences(ivs []Interval) []Violation {
	var fenced []int
	for i := range ivs {
		if ivs[i].Fence != 0 {
			fenced = append(fenced, i)
		}
	}
	byEnter := slices.Clone(fenced)
	slices.SortFunc(byEnter, func(a, b int) int {
		return cmp.Or(strings.Compare(ivs[a].Resource, ivs[b].Resource), cmp.Compare(ivs[a].Enter, ivs[b].Enter), cmp.Compare(a, b))
	})
	byEnd := fenced
	slices.SortFunc(byEnd, func(a, b int) int {
		return cmp.Or(strings.Compare(ivs[a].Resource, ivs[b].Resource), cmp.Compare(ivs[a].End(), ivs[b].End()), cmp.Compare(a, b))
	})
	var out []Violation
	j, top := 0, -1 // top: the ended interval with the greatest fence so far, on this resource
	prevX := -1     // the last Exclusive interval entered on this resource
	for _, i := range byEnter {
		cur := &ivs[i]
		if top >= 0 && ivs[top].Resource != cur.Resource {
			top = -1
		}
		if prevX >= 0 && ivs[prevX].Resource != cur.Resource {
			prevX = -1
		}
		self := false // cur ends where it enters: it is no earlier holder of its own
		for j < len(byEnd) {
			e := &ivs[byEnd[j]]
			if c := strings.Compare(e.Resource, cur.Resource); c > 0 || c == 0 && e.End() > cur.Enter {
				break
			} else if byEnd[j] == i {
				self = true
			} else if c == 0 && (top < 0 || e.Fence > ivs[top].Fence) {
				top = byEnd[j]
			}
			j++
		}
		before := top
		if cur.Mode == Exclusive {
			if prevX >= 0 && (before < 0 || ivs[prevX].Fence > ivs[before].Fence) {
				before = prevX
			}
			prevX = i
		}
		// A lock adopted by its token keeps its fence: a holder of its
		// lineage may enter with the fence of the one before it.
		adopted := cur.Lineage != 0 && before >= 0 && ivs[before].Lineage == cur.Lineage && cur.Fence == ivs[before].Fence
		if before >= 0 && cur.Fence <= ivs[before].Fence && !adopted && len(out) < maxViolations {
			out = append(out, Violation{Check: "fence", At: cur.Enter,
				What: fmt.Sprintf("%q: fence %d after %d:\n\t%v\n\tafter %v", cur.Resource, cur.Fence, ivs[before].Fence, *cur, ivs[before])})
		}
		if self && (top < 0 || cur.Fence > ivs[top].Fence) {
			top = i // for the holders after it
		}
	}
	return out
}

// DoneByDeadline checks that every holder still in its section at its
// deadline had been told by then: its lock's Done closed no later than
// the deadline (a lock kept by extending it has the extended deadline).
func DoneByDeadline(ivs []Interval) []Violation {
	var out []Violation
	for _, iv := range ivs {
		if iv.Exit > iv.Deadline && iv.Done > iv.Deadline && len(out) < maxViolations {
			what := "still held, Done not closed"
			if iv.Done != Never {
				what = fmt.Sprintf("Done closed %v late", iv.Done-iv.Deadline)
			}
			out = append(out, Violation{Check: "done", At: iv.Deadline,
				What: fmt.Sprintf("%s at the deadline: %v", what, iv)})
		}
	}
	return out
}

// Liveness checks that every Lock call acquired within bound of its start
// when it could: when a majority of the masters had no outage for its
// client (nor the client a pause) from window before its start until it
// returned (or bound after its start, if sooner), and its context allowed
// bound. A call still running bound after its start, at the history's end,
// is not judged.
func Liveness(h History, window, bound time.Duration) []Violation {
	out, _ := LivenessJudged(h, Premise{Window: window, Bound: bound})
	return out
}

// Premise is a premise of liveness and the bound it implies: a call whose
// client had a majority of the masters without an outage from Window
// before its start until it returned, or Bound after its start if sooner
// (a call that acquired needs nothing of the masters after it), and whose
// context allowed Bound, acquires within Bound.
type Premise struct{ Window, Bound time.Duration }

// LivenessJudged is Liveness under premises, each call judged by the
// first that holds for it; it also returns how many calls it judged.
func LivenessJudged(h History, premises ...Premise) ([]Violation, int) {
	var out []Violation
	n := 0
	for _, c := range h.Calls {
		var p Premise
		stable, ok := 0, false
		for _, p = range premises {
			if stable, ok = judged(h, c, p.Window, p.Bound); ok {
				break
			}
		}
		if !ok {
			continue
		}
		n++
		if c.Acquired && c.End-c.Start <= p.Bound || len(out) >= maxViolations {
			continue
		}
		what := "did not acquire"
		if c.Acquired {
			what = fmt.Sprintf("acquired after %v", c.End-c.Start)
		} else if c.End != Never {
			what = fmt.Sprintf("failed after %v", c.End-c.Start)
		}
		out = append(out, Violation{Check: "liveness", At: c.Start,
			What: fmt.Sprintf("client %d call %d on %q %s, bound %v, with %d of %d masters stable from %v to %v",
				c.Client, c.Call, c.Resource, what, p.Bound, stable, h.Masters, c.Start-p.Window, min(c.End, c.Start+p.Bound))})
	}
	return out, n
}

// judged reports whether Liveness judges c, and how many masters had no
// outage for it from window before its start until it returned or bound
// after its start, whichever came first.
func judged(h History, c Call, window, bound time.Duration) (stable int, ok bool) {
	from, to := c.Start-window, min(c.End, c.Start+bound)
	if to > h.End || c.Limit < c.Start+bound {
		return 0, false
	}
	stable = h.stableMasters(c.Client, from, to, nil)
	return stable, stable >= validity.Majority(h.Masters)
}

// stableMasters is how many masters (of those in on; nil: all) had no
// outage for client (a stall, a cut or a restart of the master or of its
// connection, or a pause of the client) from from to to.
func (h *History) stableMasters(client int, from, to time.Duration, on []int) int {
	stable := 0
	for m := range h.Masters {
		if on != nil && !slices.Contains(on, m) {
			continue
		}
		up := true
		for _, o := range h.Outages {
			if (o.Master == m || o.Master == -1) && (o.Client == -1 || o.Client == client) && o.From <= to && o.To >= from {
				up = false
				break
			}
		}
		if up {
			stable++
		}
	}
	return stable
}

// Loss is a kept lock that ended before its holder let it go: client's
// holder began keeping it at From, when the masters On held its token,
// and its Done closed at At, both on the global clock. Spare is the time
// the keeper had, as the keeping began, to extend the lock before the
// loss timer's instant: the validity left then less the timer's lead.
type Loss struct {
	Client   int
	Call     uint64
	From, At time.Duration
	Spare    time.Duration
	On       []int
	What     string
}

// Kept checks that no kept lock was lost while a majority of the masters
// held its token when its holder began keeping it and had no outage for
// its client from then until the loss, if the keeper had time for two
// round trips of at most rtt before the loss timer's instant (Spare ≥
// 2·rtt): the keeper extends a kept lock before it is declared lost while
// a majority of the masters holding it answers, its first extension going
// out by halfway to that instant (docs/design.md §8). A lock kept with
// less spare (handed over late in its window, say) may be lost to a
// round trip no slower than rtt, and is not judged. Only worlds whose
// round trips are short beside the validity window are to be judged so
// (the caller's premise).
func Kept(h *History, losses []Loss, rtt time.Duration) []Violation {
	var out []Violation
	for _, l := range losses {
		if len(l.On) == 0 || l.Spare < 2*rtt {
			continue // held on no master's key (a reader's lock), or kept too late: not judged
		}
		if n := h.stableMasters(l.Client, l.From, l.At, l.On); n >= validity.Majority(h.Masters) && len(out) < maxViolations {
			out = append(out, Violation{Check: "kept", At: l.At,
				What: fmt.Sprintf("client %d call %d: a kept lock kept from %v with %v to spare was lost with %d of %d masters holding it and stable throughout: %s", l.Client, l.Call, l.From, l.Spare, n, h.Masters, l.What)})
		}
	}
	return out
}

// Leftovers checks that no master holds a key, other than those keep
// allows (a fence counter, say; nil: none), once the run is over: no lock
// key, no queue member, no reader.
func Leftovers(w *World, keep func(key string) bool) []Violation {
	var out []Violation
	for i := range w.masters {
		for _, k := range w.masters[i].m.Keys(w.MasterNow(i)) {
			if (keep == nil || !keep(k)) && len(out) < maxViolations {
				out = append(out, Violation{Check: "leftover", At: w.now, What: fmt.Sprintf("master %d holds %q", i, k)})
			}
		}
	}
	return out
}

// Report is what a failing run prints: the seed that replays it, each
// violation, and the traced events around the first (trace: from a
// replay with Options.Trace; nil for none).
func Report(seed uint64, vs []Violation, trace []TraceEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations\n", seed, len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "%v\n", v)
	}
	if len(trace) > 0 {
		fmt.Fprintf(&b, "events around the first:\n")
		for _, e := range trace {
			fmt.Fprintf(&b, "%v\n", e)
		}
	}
	return b.String()
}

// Readings checks that a holder that read who holds its lock while it
// still counted on it (before its End) read itself: the term read is its
// own fence. A majority holds its token then, so no other holder can be
// reported by a majority (docs/design.md §21).
func Readings(h *History) []Violation {
	var out []Violation
	for _, r := range h.Readings {
		iv := h.Intervals[r.Interval]
		if r.At < iv.End() && r.Fence != iv.Fence && len(out) < maxViolations {
			out = append(out, Violation{Check: "reading", At: r.At,
				What: fmt.Sprintf("%q: the holder read term %d, its own is %d: %v", iv.Resource, r.Fence, iv.Fence, iv)})
		}
	}
	return out
}

// Holding is how many masters keep key at value from now until at least
// until (on the global clock): the key holds value there and expires no
// earlier, on the master's clock. A master down after a restart that
// emptied it counts until it is back: nobody can take the key there
// before then (assumption 2 keeps it down for a TTL and the drift).
// Client c's holder, deciding now on a lock it counts on until until,
// needs a majority (docs/design.md §2: every counted key outlives the
// holder's deadline and its SafetyMargin).
func (w *World) Holding(key, value string, until time.Duration) int {
	n := 0
	for i := range w.masters {
		m := &w.masters[i]
		kept := time.Duration(0)
		if v, gone, ok := m.m.Held(m.clk.read(w.now), key); ok && v == value {
			kept = Never
			if gone != Never {
				kept = m.clk.global(gone)
			}
		}
		if back, down := w.emptied(i); down {
			kept = max(kept, back)
		}
		if kept >= until {
			n++
		}
	}
	return n
}

// emptied reports whether master i is down after a restart that emptied
// it, and when it is back.
func (w *World) emptied(i int) (back time.Duration, down bool) {
	if w.masters[i].down == 0 {
		return 0, false
	}
	for j, f := range w.faults {
		if w.active[j] && f.Kind == RestartMaster && f.Master == i && !f.Keep {
			back, down = max(back, f.At+f.For), true
		}
	}
	return back, down
}

// HeldOn lists the masters whose keyspace holds key at value now.
func (w *World) HeldOn(key, value string) []int {
	var on []int
	for i := range w.masters {
		m := &w.masters[i]
		if v, _, ok := m.m.Held(m.clk.read(w.now), key); ok && v == value {
			on = append(on, i)
		}
	}
	return on
}

// Recorded is how many masters hold, in the hash key, field at value for
// every pair of fields (field, value, field, value, ...), read from their
// keyspaces; a master down after a restart that emptied it counts until
// it is back, as in Holding: no write can be read from it, and none
// replace it there, before then.
func (w *World) Recorded(key string, fields ...string) int {
	n := 0
	for i := range w.masters {
		if _, down := w.emptied(i); down {
			n++
			continue
		}
		m := &w.masters[i]
		all := true
		for f := 0; f+1 < len(fields) && all; f += 2 {
			r := m.m.Do(m.clk.read(w.now), []string{"HGET", key, fields[f]})
			all = r.Kind == sim.Bulk && r.Text == fields[f+1]
		}
		if all {
			n++
		}
	}
	return n
}

// Global is the global instant at which client c's clock reads local
// (Interval.Deadline is one).
func (w *World) Global(c int, local time.Duration) time.Duration {
	return w.clients[c].clk.global(local)
}

// Holders checks each count of a semaphore's holders (Observations of
// Mode Permit) against the history, resource by resource. It never
// counts a permit nobody may hold: at most as many as the calls on the
// resource whose keys may stand on the masters during the reading (a
// call from its start until keyLife after it returned or its holder
// exited; keyLife is a TTL on the slowest clock, and an extension in
// flight). And it counts every permit held throughout the reading and
// since before it began, when the reading is judged: judge(o) says
// the masters answered the reader in time (no outage for it, and
// messages within the MasterTimeout), and no master lost a key (an
// outage of every client's) from the earliest such holder's entry to the
// reading's end, nor for the reader within reprobe before the reading (a
// Locker skips a master it lost until its probe is answered, docs/design.md
// §10).
func Holders(h *History, keyLife, reprobe time.Duration, judge func(o Observation) bool) []Violation {
	var out []Violation
	exit := map[callKey]time.Duration{}
	for _, iv := range h.Intervals {
		exit[callKey{iv.Client, iv.Call}] = iv.Exit
	}
	for _, o := range h.Observations {
		if o.Mode != Permit || len(out) >= maxViolations {
			continue
		}
		may := 0
		for _, c := range h.Calls {
			if c.Resource != o.Resource || c.Start > o.End {
				continue
			}
			last := c.End
			if x, ok := exit[callKey{c.Client, c.Call}]; ok {
				last = max(last, x)
			}
			if last == Never || last+keyLife >= o.Start {
				may++
			}
		}
		held, from := 0, o.Start
		for _, iv := range h.Intervals {
			if iv.Resource == o.Resource && iv.Mode == Permit && iv.Enter <= o.Start && iv.End() >= o.End {
				held++
				from = min(from, iv.Enter)
			}
		}
		switch {
		case int(o.Value) > may:
			out = append(out, Violation{Check: "holders", At: o.End,
				What: fmt.Sprintf("client %d counted %d holders of %q in [%v, %v], when at most %d calls' keys may stand", o.Client, o.Value, o.Resource, o.Start, o.End, may)})
		case int(o.Value) < held && judge(o) && !h.outage(o.Client, min(from, o.Start-reprobe), o.End):
			out = append(out, Violation{Check: "holders", At: o.End,
				What: fmt.Sprintf("client %d counted %d holders of %q in [%v, %v], when %d held throughout it (since %v) with every master answering", o.Client, o.Value, o.Resource, o.Start, o.End, held, from)})
		}
	}
	return out
}

// outage reports whether any master had an outage for client (its own,
// or every client's) in [from, to].
func (h *History) outage(client int, from, to time.Duration) bool {
	for _, o := range h.Outages {
		if (o.Client == -1 || o.Client == client) && o.From <= to && o.To >= from {
			return true
		}
	}
	return false
}

// Terms checks the readings of who leads (Observations of Mode
// Exclusive), election by election: an observer's terms never go back
// (each Observe channel's, each reader's Leader calls), and a reading
// begun after another returned reports a term no older than it: a term
// read was on a majority of the masters, and no older term is after it.
func Terms(h *History) []Violation {
	var obs []int
	for i, o := range h.Observations {
		if o.Mode == Exclusive {
			obs = append(obs, i)
		}
	}
	var out []Violation
	type seq struct {
		client   int
		observer uint64
		resource string
	}
	last := map[seq]int{}
	for _, i := range obs { // in the order they returned
		o := &h.Observations[i]
		k := seq{o.Client, o.Observer, o.Resource}
		if j, ok := last[k]; ok && h.Observations[j].Value > o.Value && len(out) < maxViolations {
			out = append(out, Violation{Check: "terms", At: o.End,
				What: fmt.Sprintf("client %d observer %d of %q read term %d after term %d", o.Client, o.Observer, o.Resource, o.Value, h.Observations[j].Value)})
		}
		last[k] = i
	}
	byStart := slices.Clone(obs)
	slices.SortStableFunc(byStart, func(a, b int) int {
		oa, ob := &h.Observations[a], &h.Observations[b]
		return cmp.Or(strings.Compare(oa.Resource, ob.Resource), cmp.Compare(oa.Start, ob.Start))
	})
	byEnd := obs
	slices.SortStableFunc(byEnd, func(a, b int) int {
		oa, ob := &h.Observations[a], &h.Observations[b]
		return cmp.Or(strings.Compare(oa.Resource, ob.Resource), cmp.Compare(oa.End, ob.End))
	})
	j, top := 0, -1 // top: the reading returned so far with the greatest term, on this resource
	for _, i := range byStart {
		cur := &h.Observations[i]
		if top >= 0 && h.Observations[top].Resource != cur.Resource {
			top = -1
		}
		for j < len(byEnd) {
			e := &h.Observations[byEnd[j]]
			if c := strings.Compare(e.Resource, cur.Resource); c > 0 || c == 0 && e.End >= cur.Start {
				break
			} else if c == 0 && (top < 0 || e.Value > h.Observations[top].Value) {
				top = byEnd[j]
			}
			j++
		}
		if top >= 0 && cur.Value < h.Observations[top].Value && len(out) < maxViolations {
			t := &h.Observations[top]
			out = append(out, Violation{Check: "terms", At: cur.End,
				What: fmt.Sprintf("%q: client %d read term %d in [%v, %v], after client %d read term %d in [%v, %v]",
					cur.Resource, cur.Client, cur.Value, cur.Start, cur.End, t.Client, t.Value, t.Start, t.End)})
		}
	}
	return out
}

// Closings checks each client's Shutdown and Close: once it returned, no
// call of the client's is still running, and the client sends nothing
// more to the masters (nothing it held is extended, nothing is taken).
func Closings(h *History) []Violation {
	var out []Violation
	for _, c := range h.Closings {
		what := "Close"
		if c.Shutdown {
			what = "Shutdown"
		}
		if len(c.Running) > 0 && len(out) < maxViolations {
			out = append(out, Violation{Check: "closing", At: c.At,
				What: fmt.Sprintf("client %d: %s returned with calls %v still running", c.Client, what, c.Running)})
		}
		if c.SentAfter > 0 && len(out) < maxViolations {
			out = append(out, Violation{Check: "closing", At: c.FirstAfter,
				What: fmt.Sprintf("client %d: %d commands sent after %s returned at %v", c.Client, c.SentAfter, what, c.At)})
		}
	}
	return out
}
