package wait

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLocal answers the machine's questions as its fields say, and
// records what it was told.
type fakeLocal struct {
	grant                bool // Register's answer with mayHand
	grants               int
	take, first, popped  bool
	majNow, majLater     bool
	freed                bool
	registered, mayHand  int
	backoff              time.Duration
	backoffN             []int
	tookGrants, askedMaj int
}

func (f *fakeLocal) Register(mayHand bool) bool {
	f.registered++
	if mayHand {
		f.mayHand++
		return f.grant
	}
	return false
}
func (f *fakeLocal) Grants() int { return f.grants }
func (f *fakeLocal) TakeGrants() bool {
	f.tookGrants++
	return f.take
}
func (f *fakeLocal) FirstInLine() bool { return f.first }
func (f *fakeLocal) Popped() bool      { return f.popped }
func (f *fakeLocal) WakeOnMajority() (bool, bool) {
	f.askedMaj++
	return f.majNow, f.majLater
}
func (f *fakeLocal) FreedSince(time.Time) bool { return f.freed }
func (f *fakeLocal) Backoff(n int) time.Duration {
	f.backoffN = append(f.backoffN, n)
	return f.backoff
}

var _ Local = (*fakeLocal)(nil)

const nt = 50 * time.Millisecond

var t0 = time.Unix(1_700_000_000, 0)

func cfg(target Target) Config {
	return Config{Target: target, Need: 3, MasterTimeout: nt}
}

func want(t *testing.T, a Action, k Kind) {
	t.Helper()
	if a.Kind != k {
		t.Fatalf("action %v (%+v), want %v", a.Kind, a, k)
	}
}

func wantEnd(t *testing.T, a Action, e End) {
	t.Helper()
	if a.Kind != Done || a.End != e {
		t.Fatalf("action %v end %d, want Done end %d", a.Kind, a.End, e)
	}
}

// An uncontended Lock: one round, acquired, nothing to take back.
func TestUncontended(t *testing.T) {
	f := &fakeLocal{}
	m := New(cfg(Target{Queued: true}), f)
	want(t, m.Start(t0, false, false), Round)
	wantEnd(t, m.RoundDone(t0, RoundResult{Final: true, Acquired: true}), EndRound)
	if m.Leave() != LeaveNothing || m.Waited() || m.Attempts() != 1 || f.registered != 0 {
		t.Fatalf("leave %d waited %v attempts %d registered %d", m.Leave(), m.Waited(), m.Attempts(), f.registered)
	}
}

// A round refused by a holder on a majority: the waiter registers (a
// waiter a release may hand the key to), joins the queue, polls the
// holder's expiry, and sleeps until that expiry when it is sooner than
// its queued backoff.
func TestHeldThenWaitsForExpiry(t *testing.T) {
	f := &fakeLocal{grant: true, backoff: time.Second}
	m := New(cfg(Target{Queued: true}), f)
	want(t, m.Start(t0, false, false), Round)
	want(t, m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true}), Join)
	if f.mayHand != 1 {
		t.Fatalf("Register(mayHand) calls %d, want 1", f.mayHand)
	}
	want(t, m.JoinDone(t0), Probe)
	a := m.ProbeDone(t0, false, t0.Add(300*time.Millisecond))
	want(t, a, Sleep)
	if a.Delay != 300*time.Millisecond {
		t.Fatalf("delay %v, want the holder's expiry 300ms", a.Delay)
	}
	if got := f.backoffN[len(f.backoffN)-1]; got != 1+QueuedSteps {
		t.Fatalf("backoff asked for attempt %d, want the queued %d", got, 1+QueuedSteps)
	}
	// Woken at the expiry, first in line: the poll, then a round at once
	// (woke is false, held is true: the poll; the key is free and this
	// waiter is at the head, expiring: a round).
	f.first = true
	want(t, m.TimerFired(t0.Add(300*time.Millisecond)), Probe)
	want(t, m.ProbeDone(t0, true, time.Time{}), Rank)
	want(t, m.RankDone(t0, 1), Round)
	wantEnd(t, m.RoundDone(t0, RoundResult{Final: true, Acquired: true}), EndRound)
	if m.Leave() != LeaveGiveBack || !m.Waited() {
		t.Fatalf("leave %d waited %v, want a give-back (a grant waiter that joined) and waited", m.Leave(), m.Waited())
	}
}

// A waiter handed the key by a minority waits the first backoff from its
// first grant (wakes meanwhile do not put it off: a wait restarted by
// every wake let a waiter woken every few milliseconds sit on its grant
// for good), then reads every master, completes where the key is free,
// and with no majority then gives back and waits on as a waiter that
// releases name: it acquires by rounds of its own (§14.3 item 5).
func TestMinorityOfGrantsGivesBack(t *testing.T) {
	f := &fakeLocal{grant: true, backoff: 5 * time.Millisecond}
	m := New(cfg(Target{Queued: true}), f)
	m.Start(t0, false, false)
	m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true})
	m.JoinDone(t0)
	m.ProbeDone(t0, false, time.Time{})
	f.grants = 2
	for i, at := range []time.Duration{0, time.Millisecond, 4 * time.Millisecond} {
		a := m.Woken(t0.Add(at))
		want(t, a, Sleep)
		if a.Delay != 5*time.Millisecond-at {
			t.Fatalf("wake %d at +%v: delay %v, want %v (the first backoff, from the first grant)", i, at, a.Delay, 5*time.Millisecond-at)
		}
	}
	want(t, m.TimerFired(t0.Add(5*time.Millisecond)), Probe)
	want(t, m.ProbeDone(t0, false, time.Time{}), Complete)
	a := m.CompleteDone(t0)
	want(t, a, GiveBack)
	if !a.Again {
		t.Fatal("give-back without Again: the waiter waits on")
	}
	want(t, m.GiveBackDone(t0), Join)
	f.grants = 0 // the give-back ended the count
	want(t, m.JoinDone(t0), Sleep)
	if m.Leave() != LeaveQueue {
		t.Fatalf("leave %d after the give-back, want LeaveQueue (a named waiter's bare member)", m.Leave())
	}
	// Named by the next release: a round of its own.
	f.popped = true
	want(t, m.Woken(t0), Round)
	if a := m.RoundDone(t0, RoundResult{Final: true, Acquired: true}); a.Kind != Done || a.End != EndRound {
		t.Fatalf("action %+v, want Done(Round)", a)
	}
}

// A minority of grants found by a poll (their messages lost) is completed
// at once: the poll read every master.
func TestPolledMinorityCompletes(t *testing.T) {
	f := &fakeLocal{grant: true, backoff: time.Second}
	m := New(cfg(Target{Queued: true}), f)
	m.Start(t0, false, false)
	m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true})
	m.JoinDone(t0)
	f.grants = 1
	want(t, m.ProbeDone(t0, false, time.Time{}), Complete)
	f.take = true
	wantEnd(t, m.CompleteDone(t0), EndHanded)
}

// A wake on the first master's announcement whose round fails: retry at
// once when a majority has announced by now, else sleep until it has.
func TestWokenRoundRetriesOnMajority(t *testing.T) {
	f := &fakeLocal{backoff: time.Second}
	m := New(cfg(Target{Queued: true}), f)
	m.Start(t0, false, false)
	m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true})
	m.JoinDone(t0)
	m.ProbeDone(t0, false, time.Time{})
	f.popped = true
	want(t, m.Woken(t0), Round)
	f.majNow = true
	want(t, m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true}), Round)
	f.majNow, f.majLater = false, true
	// retried already: no second ask on the same wake; back in the queue.
	want(t, m.RoundDone(t0, RoundResult{HeldByMajority: true, HeldElsewhere: true}), Join)
	if f.askedMaj != 1 {
		t.Fatalf("WakeOnMajority asked %d times, want once per wake", f.askedMaj)
	}
}

// MaxAttempts ends the wait; the context ending while asleep ends it;
// Close ends it; an event that does not fit the state ends it as invalid.
func TestEnds(t *testing.T) {
	f := &fakeLocal{backoff: time.Millisecond}
	c := cfg(Target{Queued: true})
	c.MaxAttempts = 2
	m := New(c, f)
	m.Start(t0, false, false)
	want(t, m.RoundDone(t0, RoundResult{}), Sleep) // split votes: the short backoff
	want(t, m.TimerFired(t0), Round)
	wantEnd(t, m.RoundDone(t0, RoundResult{}), EndGaveUp)

	m = New(cfg(Target{}), f)
	m.Start(t0, false, false)
	wantEnd(t, m.RoundDone(t0, RoundResult{CtxEnded: true}), EndRoundCtx)

	m = New(cfg(Target{}), f)
	m.Start(t0, true, false) // behind this Locker's waiters: no round
	wantEnd(t, m.CtxEnded(t0), EndCtx)
	m = New(cfg(Target{}), f)
	m.Start(t0, true, false)
	wantEnd(t, m.Closed(t0), EndClosed)

	m = New(cfg(Target{}), f)
	wantEnd(t, m.TimerFired(t0), EndInvalid)
	m = New(cfg(Target{}), f)
	m.Start(t0, false, false)
	wantEnd(t, m.Woken(t0), EndInvalid) // a round is out, not a sleep
}

// A writer whose round asked its place and was refused by it goes back to
// its place without counting an attempt, and rejoins where the round was
// granted all the same.
func TestWriterBehindItsPlace(t *testing.T) {
	f := &fakeLocal{backoff: time.Second}
	m := New(cfg(Target{Queued: true, Writer: true}), f)
	m.Start(t0, false, false)
	m.RoundDone(t0, RoundResult{WriterHeld: true, HeldElsewhere: true})
	m.JoinDone(t0) // held by another writer (WriterHeld): the expiry poll
	m.ProbeDone(t0, false, time.Time{})
	want(t, m.Woken(t0), Round) // a writer asks its place in its round
	a := m.RoundDone(t0, RoundResult{Place: 3, GrantedSomewhere: true})
	want(t, a, Join)
	if m.Attempts() != 1 {
		t.Fatalf("attempts %d, want the refused round not counted", m.Attempts())
	}
	want(t, m.JoinDone(t0), Sleep)
}

// events is every event, by the name the table uses, with arguments drawn
// from r.
var events = []struct {
	name string
	fire func(m *Machine, r *rand.Rand) Action
}{
	{"Start", func(m *Machine, r *rand.Rand) Action { return m.Start(t0, r.IntN(2) == 0, r.IntN(2) == 0) }},
	{"RoundDone", func(m *Machine, r *rand.Rand) Action {
		res := RoundResult{Final: r.IntN(4) == 0, CtxEnded: r.IntN(4) == 0, Place: uint64(r.IntN(4)),
			GrantedSomewhere: r.IntN(2) == 0, HeldByMajority: r.IntN(2) == 0, WriterHeld: r.IntN(2) == 0, HeldElsewhere: r.IntN(2) == 0}
		res.Acquired = res.Final && r.IntN(2) == 0
		return m.RoundDone(t0, res)
	}},
	{"JoinDone", func(m *Machine, r *rand.Rand) Action { return m.JoinDone(t0) }},
	{"ProbeDone", func(m *Machine, r *rand.Rand) Action {
		var exp time.Time
		if r.IntN(2) == 0 {
			exp = t0.Add(time.Duration(r.IntN(100)) * time.Millisecond)
		}
		return m.ProbeDone(t0, r.IntN(2) == 0, exp)
	}},
	{"RankDone", func(m *Machine, r *rand.Rand) Action { return m.RankDone(t0, uint64(r.IntN(4))) }},
	{"CompleteDone", func(m *Machine, r *rand.Rand) Action { return m.CompleteDone(t0) }},
	{"GiveBackDone", func(m *Machine, r *rand.Rand) Action { return m.GiveBackDone(t0) }},
	{"TimerFired", func(m *Machine, r *rand.Rand) Action { return m.TimerFired(t0) }},
	{"Woken", func(m *Machine, r *rand.Rand) Action { return m.Woken(t0) }},
	{"CtxEnded", func(m *Machine, r *rand.Rand) Action { return m.CtxEnded(t0) }},
	{"Closed", func(m *Machine, r *rand.Rand) Action { return m.Closed(t0) }},
}

var endNames = map[End]string{EndRound: "Round", EndRoundCtx: "RoundCtx", EndGaveUp: "GaveUp", EndHanded: "Handed", EndCtx: "Ctx", EndClosed: "Closed"}

// outcomes is, for state st and event e, every action the machine can
// answer over all its flags and all of Local's answers (a random walk of
// them), as the table writes it: the action's kind, "Done(end)" for an
// end, and "—" when the event does not fit the state.
func outcomes(st state, e int) string {
	r := rand.New(rand.NewPCG(uint64(st), uint64(e)))
	seen := map[string]bool{}
	for range 4000 {
		f := &fakeLocal{grant: r.IntN(2) == 0, grants: r.IntN(4), take: r.IntN(3) == 0, first: r.IntN(2) == 0,
			popped: r.IntN(2) == 0, majNow: r.IntN(2) == 0, majLater: r.IntN(2) == 0, freed: r.IntN(2) == 0,
			backoff: time.Duration(r.IntN(100)) * time.Millisecond}
		c := Config{Target: Target{Queued: r.IntN(2) == 0, Reader: r.IntN(3) == 0, Writer: r.IntN(3) == 0, Multi: r.IntN(3) == 0},
			Need: 3, MaxAttempts: r.IntN(3), MasterTimeout: nt}
		m := New(c, f)
		m.st = st
		m.attempt = r.IntN(3)
		m.registered, m.grant = r.IntN(2) == 0, r.IntN(2) == 0
		m.round, m.joined, m.woke, m.retried = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
		m.ask, m.everJoined, m.giving = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
		m.giveAt = t0.Add(time.Duration(r.IntN(10)) * time.Millisecond)
		m.probes, m.suspect, m.behind, m.held = r.IntN(8), r.IntN(2) == 0, uint64(r.IntN(4)), r.IntN(2) == 0
		m.expiring = r.IntN(2) == 0
		if r.IntN(2) == 0 {
			m.expires = t0.Add(time.Duration(r.IntN(100)) * time.Millisecond)
		}
		a := events[e].fire(&m, r)
		switch {
		case a.Kind == Done && a.End == EndInvalid:
			seen["—"] = true
		case a.Kind == Done:
			seen["Done("+endNames[a.End]+")"] = true
		default:
			seen[a.Kind.String()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// The state table in docs/design.md (§14.4) is the machine's: for every
// state and every event, the actions the table lists are exactly the ones
// the machine can answer, and the table lists every pair where the event
// fits the state.
func TestTableMatchesDesign(t *testing.T) {
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- wait-table -->")
	table, _, ok2 := strings.Cut(rest, "<!-- /wait-table -->")
	if !ok || !ok2 {
		t.Fatal("docs/design.md has no <!-- wait-table --> ... <!-- /wait-table --> block")
	}
	documented := map[string]string{}
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 || strings.HasPrefix(strings.TrimSpace(cells[0]), "-") || strings.TrimSpace(cells[0]) == "state" {
			continue
		}
		key := strings.TrimSpace(cells[0]) + " × " + strings.TrimSpace(cells[1])
		documented[key] = strings.TrimSpace(cells[2])
	}
	var missing []string
	for st := stNew; st < stDone; st++ {
		for e, ev := range events {
			got := outcomes(st, e)
			key := st.String() + " × " + ev.name
			doc, listed := documented[key]
			delete(documented, key)
			switch {
			case got == "—" && !listed:
			case !listed:
				missing = append(missing, fmt.Sprintf("| %s | %s | %s |", st, ev.name, got))
			case doc != got:
				t.Errorf("%s: the table says %q, the machine answers %q", key, doc, got)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("pairs the machine accepts that the table does not list:\n%s", strings.Join(missing, "\n"))
	}
	for key := range documented {
		t.Errorf("the table lists %s, which is not a state × event of the machine", key)
	}
}
