package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Each failed Campaign of an election run is explained by what the run
// saw while it waited: the fewest masters that answered the prober, the
// fault episodes that overlapped it, and the leaderships during it.

// Episode is one fault of the schedule as the run applied it: From is
// when it landed (monoNow: for a master fault when it was applied, for a
// leader fault when its campaigner entered leadership), To when it was
// undone (a killed leader: when its successor process started).
type Episode struct {
	Fault Fault `json:"fault"`
	From  int64 `json:"from"`
	To    int64 `json:"to"`
	// Leader is the campaigner a leader fault landed on (its client id).
	Leader int `json:"leader,omitempty"`
}

// episodes records the episodes a run applied; safe for concurrent use.
type episodes struct {
	mu   sync.Mutex
	list []Episode
}

func (e *episodes) add(ep Episode) {
	e.mu.Lock()
	e.list = append(e.list, ep)
	e.mu.Unlock()
}

func (e *episodes) all() []Episode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// FailedCampaign is one Campaign that returned an error, with what the
// run saw around it. Every offset is from the call's start (Start,
// monoNow); negative offsets are before it.
type FailedCampaign struct {
	Client int           `json:"client"`
	Start  int64         `json:"start"`
	Wait   time.Duration `json:"wait_ns"`
	Err    string        `json:"err,omitempty"`
	Lost   bool          `json:"lost,omitempty"` // the error wraps redlock.ErrLost
	// MinAnswering is the fewest masters that answered one prober round
	// overlapping [Start-TTL, Start+Wait] (-1: no round did).
	MinAnswering int `json:"min_answering"`
	// Unobserved is how much of that span no prober round covered
	// (prober.unobserved): the prober's own process did not run, so it
	// cannot say that a majority answered then.
	Unobserved time.Duration `json:"unobserved_ns,omitempty"`
	// Unreleased counts the leaderships that ended without a release in
	// [Start-TTL, Start+Wait]: leader faults that landed then, and
	// leaderships let lapse; Own, whether a leader fault on this
	// campaigner overlapped that span (cut off, it cannot reach a
	// majority; frozen, it resumes with its view of the masters stale).
	Unreleased int  `json:"unreleased"`
	Own        bool `json:"own_fault,omitempty"`
	// Premise: the liveness bound's premise held (liveBound), so the
	// failure is a violation of the bound.
	Premise bool `json:"premise_held"`
	// Episodes overlapping [Start-2·TTL, Start+Wait]: a leader's key can
	// outlive its fault by a TTL.
	Episodes []EpisodeAround `json:"episodes,omitempty"`
	// Leaderships overlapping [Start-TTL, Start+Wait].
	Leaders []LeaderAround `json:"leaders,omitempty"`
}

// EpisodeAround is an episode's span as offsets from a failed call's start.
type EpisodeAround struct {
	Fault string        `json:"fault"`
	From  time.Duration `json:"from_ns"`
	To    time.Duration `json:"to_ns"`
}

// LeaderAround is a leadership as offsets from a failed call's start: Exit
// is the section's exit (clipped at the deadline), or Unknown when no
// section was recorded (a leader killed before its first step, or one
// that lapsed before it entered).
type LeaderAround struct {
	Client  int           `json:"client"`
	Term    uint64        `json:"term"`
	Enter   time.Duration `json:"enter_ns"`
	Exit    time.Duration `json:"exit_ns,omitempty"`
	Unknown bool          `json:"exit_unknown,omitempty"`
	Late    bool          `json:"late,omitempty"`
	Lapsed  bool          `json:"lapsed,omitempty"`
}

// The election's liveness bound (docs/design.md §21), as the soak judges
// it: a Campaign whose premise held must acquire within its limit
// (AcquireTimeout, 4 TTL). The premise, each part checkable from the
// run's record:
//   - a majority of masters answered every prober round from a TTL
//     before the call to its end (MinAnswering ≥ majority), and prober
//     rounds covered all of that span (Unobserved = 0);
//   - at most one leadership ended without a release in that span (a
//     leader frozen, killed or cut, or let lapse: its key lives up to a
//     TTL; Unreleased ≤ 1);
//   - no leader fault on the calling campaigner overlapped that span
//     (Own): the campaigner itself reached the masters.
func (fc *FailedCampaign) judge(need int) {
	fc.Premise = fc.MinAnswering >= need && fc.Unobserved == 0 && fc.Unreleased <= 1 && !fc.Own
}

// explainFailures returns an account of each failed Campaign in h, judged
// against the liveness bound's premise (need: the majority).
func explainFailures(h *History, eps []Episode, p *prober, ttl time.Duration, need int) []FailedCampaign {
	type key struct {
		client int
		seq    int64
	}
	secs := map[key]Section{}
	for _, s := range h.Sections() {
		secs[key{s.Client, s.Seq}] = s
	}
	leads := h.Leaderships()
	var out []FailedCampaign
	for _, a := range h.Acquires() {
		if a.OK || a.Start == 0 {
			continue
		}
		end, from := a.Start+int64(a.Latency), a.Start-int64(ttl)
		fc := FailedCampaign{Client: a.Client, Start: a.Start, Wait: a.Latency, Err: a.Err, Lost: a.Lost, MinAnswering: p.minUp(from, end), Unobserved: p.unobserved(from, end)}
		rel := func(t int64) time.Duration { return time.Duration(t - a.Start) }
		for _, ep := range eps {
			if ep.From <= end && ep.To >= a.Start-int64(2*ttl) {
				fc.Episodes = append(fc.Episodes, EpisodeAround{Fault: ep.Fault.String(), From: rel(ep.From), To: rel(ep.To)})
			}
			if !ep.Fault.Kind.onClient() {
				continue
			}
			if ep.From >= from && ep.From <= end {
				fc.Unreleased++
			}
			if ep.Leader == a.Client && ep.From <= end && ep.To >= from {
				fc.Own = true
			}
		}
		for _, l := range leads {
			s, ok := secs[key{l.Client, l.Seq}]
			exit := s.Exit
			if !ok {
				exit = l.At + int64(ttl) // at most a TTL without a keeper's extension; shown as unknown
			}
			if l.At > end || exit < a.Start-int64(ttl) {
				continue
			}
			if s.Lapsed && exit >= from && exit <= end {
				fc.Unreleased++
			}
			la := LeaderAround{Client: l.Client, Term: l.Term, Enter: rel(l.At), Unknown: !ok, Late: s.Late, Lapsed: s.Lapsed}
			if ok {
				la.Exit = rel(exit)
			}
			fc.Leaders = append(fc.Leaders, la)
		}
		fc.judge(need)
		out = append(out, fc)
	}
	slices.SortFunc(out, func(a, b FailedCampaign) int { return int(min(max(a.Start-b.Start, -1), 1)) })
	return out
}

// minUp is the fewest masters that answered a prober round whose span
// (from its start to the next round's) overlaps [from, to]; -1 if none.
func (p *prober) minUp(from, to int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	least := -1
	for i, s := range p.samples {
		next := s.at + int64(reachEvery)
		if i+1 < len(p.samples) {
			next = p.samples[i+1].at
		}
		if s.at > to || next < from {
			continue
		}
		if least < 0 || s.up < least {
			least = s.up
		}
	}
	return least
}

func (fc FailedCampaign) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client %d waited %v (%s); premise held %v (fewest masters answering %d, unobserved by the prober %v, leaderships ended unreleased %d, own fault %v)",
		fc.Client, fc.Wait.Round(time.Millisecond), fc.Err, fc.Premise, fc.MinAnswering, fc.Unobserved.Round(time.Millisecond), fc.Unreleased, fc.Own)
	for _, e := range fc.Episodes {
		fmt.Fprintf(&b, "; %s [%v, %v]", e.Fault, e.From.Round(time.Millisecond), e.To.Round(time.Millisecond))
	}
	for _, l := range fc.Leaders {
		exit := l.Exit.Round(time.Millisecond).String()
		if l.Unknown {
			exit = "?"
		}
		fmt.Fprintf(&b, "; leader %d term %d [%v, %s]", l.Client, l.Term, l.Enter.Round(time.Millisecond), exit)
		if l.Late {
			b.WriteString(" late")
		}
		if l.Lapsed {
			b.WriteString(" lapsed")
		}
	}
	return b.String()
}
