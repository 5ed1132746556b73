package chaos

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The election scenario's checker and its report: CheckElection checks a
// History that RunElection recorded (election.go describes what it
// checks), and ElectionTable writes the verdicts.

// ElectionVerdict is what CheckElection found beyond Check's Verdict (on
// the leader-sections and the resource's writes).
type ElectionVerdict struct {
	// Terms counts leaderships (Campaigns that returned a leadership);
	// DuplicateTerms those whose term an earlier one had.
	Terms          int `json:"terms"`
	DuplicateTerms int `json:"duplicate_terms"`
	// Per observer, in observer order: deliveries and distinct terms.
	Observers     []ObserverStats `json:"observers"`
	Deliveries    int             `json:"deliveries"`
	ObservedTerms int             `json:"observed_terms"` // delivered to at least one observer
	TermsBack     int             `json:"observed_terms_back"`
	Repeats       int             `json:"observed_repeats"`
	Phantoms      int             `json:"observed_phantoms"`
	// GivenBack counts the terms delivered that no leader had: each taken
	// by a Campaign, its value written on a majority too late, and given
	// back (the Campaign then led under a later term with that value).
	GivenBack      int    `json:"observed_given_back,omitempty"`
	Kills          int    `json:"leaders_killed,omitempty"`
	Freezes        int    `json:"leaders_frozen,omitempty"`
	Cuts           int    `json:"leaders_cut,omitempty"`
	Lapses         int    `json:"leaderships_lapsed,omitempty"`
	ObserveExample string `json:"observe_example,omitempty"`
	// FailedCampaigns explains each Campaign that returned an error
	// (explain.go). LostInPublish counts those whose error wraps ErrLost
	// (§21: a Campaign whose publish fell short gives the lock back and
	// campaigns again; its limit came while it published, or after it
	// had given a lock back, which the bound does not cover);
	// LivenessViolations, the others whose liveness premise held
	// (FailedCampaign.judge): each ran to its limit where the bound says
	// it acquires.
	FailedCampaigns    []FailedCampaign `json:"failed_campaigns,omitempty"`
	LostInPublish      int              `json:"failed_lost_in_publish"`
	LivenessViolations int              `json:"liveness_violations"`
}

// ObserverStats is one observer's share.
type ObserverStats struct {
	Observer   int `json:"observer"`
	Deliveries int `json:"deliveries"`
	Terms      int `json:"terms"`
}

// CheckElection runs every check on an election's history (see the top of
// this file): Check on the leader-sections (one resource, the election)
// and the resource's writes, then the terms and the observers.
func CheckElection(h *History) (Verdict, ElectionVerdict) {
	secs := h.Sections()
	v := Check(secs, h.Writes())
	var ev ElectionVerdict
	for _, s := range secs {
		if s.Lapsed {
			ev.Lapses++
		}
	}
	leads := h.Leaderships()
	ev.Terms = len(leads)
	terms := make(map[uint64]bool, len(leads))
	for _, l := range leads {
		if terms[l.Term] {
			ev.DuplicateTerms++
		}
		terms[l.Term] = true
	}
	// What each value was published under, and from when. A Campaign's
	// value (set out with no term) may also be delivered under an earlier
	// term that no leader had: a term its Campaign took, published on a
	// majority too late, and gave back before campaigning again (docs/
	// design.md §21); a Proclaim's only under its own term.
	type pub struct {
		at       int64
		term     uint64
		campaign bool
	}
	pubs := map[string]pub{}
	for _, p := range h.Publications() {
		pubs[p.Value] = pub{at: p.At, term: p.Term, campaign: p.Term == 0}
	}
	for _, l := range leads {
		p := pubs[l.Value]
		p.term = l.Term
		if _, ok := pubs[l.Value]; !ok {
			p.at = math.MaxInt64 // a leadership with no publication recorded: every delivery of it is a phantom
		}
		pubs[l.Value] = p
	}
	ds := h.Deliveries()
	ev.Deliveries = len(ds)
	byObs := map[int][]Delivery{}
	var order []int
	for _, d := range ds {
		if _, ok := byObs[d.Observer]; !ok {
			order = append(order, d.Observer)
		}
		byObs[d.Observer] = append(byObs[d.Observer], d)
	}
	slices.Sort(order)
	seen, givenBack := map[uint64]bool{}, map[uint64]bool{}
	bad := func(format string, a ...any) {
		if ev.ObserveExample == "" {
			ev.ObserveExample = fmt.Sprintf(format, a...)
		}
	}
	for _, o := range order {
		list := byObs[o]
		// One observer records from one goroutine, in delivery order;
		// the sort only guards against a merge that reordered them.
		slices.SortStableFunc(list, func(a, b Delivery) int { return cmp.Compare(a.At, b.At) })
		st := ObserverStats{Observer: o, Deliveries: len(list)}
		mine := map[uint64]bool{}
		for i, d := range list {
			mine[d.Term], seen[d.Term] = true, true
			if i > 0 {
				prev := list[i-1]
				if d.Term < prev.Term {
					ev.TermsBack++
					bad("observer %d was delivered term %d (%q) after term %d (%q)", o, d.Term, d.Value, prev.Term, prev.Value)
				} else if d.Term == prev.Term && d.Value == prev.Value {
					ev.Repeats++
					bad("observer %d was delivered term %d (%q) twice in a row", o, d.Term, d.Value)
				}
			}
			p, ok := pubs[d.Value]
			switch {
			case !ok:
				ev.Phantoms++
				bad("observer %d was delivered %q (term %d), which no campaigner set out to publish", o, d.Value, d.Term)
			case p.campaign && p.term != 0 && d.Term < p.term && !terms[d.Term]:
				if !givenBack[d.Term] {
					givenBack[d.Term] = true
					ev.GivenBack++
				}
			case p.term != 0 && p.term != d.Term:
				ev.Phantoms++
				bad("observer %d was delivered %q under term %d; it was published under term %d", o, d.Value, d.Term, p.term)
			case d.At < p.at:
				ev.Phantoms++
				bad("observer %d was delivered %q %v before its campaigner set out to publish it", o, d.Value, time.Duration(p.at-d.At))
			}
		}
		st.Terms = len(mine)
		ev.Observers = append(ev.Observers, st)
	}
	ev.ObservedTerms = len(seen)
	return v, ev
}

// ElectionTable writes election results as a Markdown table.
func ElectionTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| scenario | faults | inside assumptions | terms | leader sections | two leaders at once | term regressions | observers: deliveries (terms seen) | observed terms back / phantom | stale writes attempted / accepted | availability % | p99 Campaign |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		ev := r.Election
		if ev == nil {
			ev = &ElectionVerdict{}
		}
		inside, avail, p99 := r.summaryCells()
		var obs []string
		for _, o := range ev.Observers {
			obs = append(obs, fmt.Sprintf("%d (%d)", o.Deliveries, o.Terms))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %d | %s | %d / %d | %d / %d | %s | %s |\n",
			r.Scenario, r.Faults, inside, ev.Terms, r.Sections, r.Overlaps, r.FenceRegressions,
			cmp.Or(strings.Join(obs, ", "), "–"), ev.TermsBack, ev.Phantoms, r.StaleAttempted, r.StaleAccepted, avail, p99)
	}
}

// electionString is a one-line account of an election result for the
// test log.
func electionString(r Result) string {
	ev := r.Election
	if ev == nil {
		return r.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d terms (%d duplicate), %d leader sections, %d overlapping (mutex model %s, fenced model %s), %d term regressions, %d late exits (frozen leaders), ",
		r.Scenario, ev.Terms, ev.DuplicateTerms, r.Sections, r.Overlaps, r.MutexOK, r.FencedOK, r.FenceRegressions, r.Late)
	fmt.Fprintf(&b, "observers %+v: %d deliveries of %d terms, %d back, %d repeated, %d phantom; ", ev.Observers, ev.Deliveries, ev.ObservedTerms, ev.TermsBack, ev.Repeats, ev.Phantoms)
	fmt.Fprintf(&b, "writes %d: %d stale rejected (%d by the only leader), %d stale accepted, %d killed in flight, %d errors (resource model %s); ",
		r.Writes, r.StaleAttempted, r.RejectedExclusive, r.StaleAccepted, r.InFlight, r.WriteErrors, r.ResourceOK)
	fmt.Fprintf(&b, "leaders frozen %d, killed %d, cut %d, lapsed %d; faults %d; failed Campaigns %d (%d lost in publish), liveness violations (failed within the bound's premise) %d",
		ev.Freezes, ev.Kills, ev.Cuts, ev.Lapses, r.FaultsRun, len(ev.FailedCampaigns), ev.LostInPublish, ev.LivenessViolations)
	if r.Acquires > 0 {
		fmt.Fprintf(&b, ", Campaigns %d, availability %.1f%%, p99 Campaign %v", r.Acquires, r.Availability, r.P99Acquire)
	}
	fmt.Fprintf(&b, ", wall %v", r.Wall.Round(time.Millisecond))
	if r.MinorityExceeded > 0 || r.FailedWithoutMajority > 0 {
		fmt.Fprintf(&b, "; fewer than a majority of masters answered the prober for %v in all, through which %d of the failed Campaigns waited", r.MinorityExceeded, r.FailedWithoutMajority)
	}
	if r.Example != "" {
		b.WriteString("; first overlap: " + r.Example)
	}
	if ev.ObserveExample != "" {
		b.WriteString("; observers: " + ev.ObserveExample)
	}
	if r.Notes != "" {
		b.WriteString("; " + r.Notes)
	}
	return b.String()
}
