package chaos

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var (
	termsFlag    = flag.Int("chaos.terms", 0, "with -chaos.long: leadership terms the election row inside the assumptions runs to (0: 100 000); make chaos-election")
	electionMax  = flag.Duration("chaos.election.max", 45*time.Minute, "with -chaos.long: the longest the election row inside the assumptions runs; it fails if the terms are not in by then")
	electionJSON = flag.String("chaos.election.json", "", "write TestElection's results as JSON to this file")
)

// electionWorkloads is the election row inside the assumptions: TTL 500 ms
// and MasterTimeout 50 ms as the mutex's rows, the same master faults
// (a minority paused, killed and restarted after a TTL, slowed, cut), and
// the leader faults on the two subprocess campaigners: frozen past their
// deadline, killed, cut off every master. Three in-process campaigners
// beside them; two observers in the test process and one in a subprocess.
func electionWorkload(long, docker bool) ElectionWorkload {
	kinds := []Kind{PauseMasters, KillDelayed, Latency, Cut, FreezeLeader, KillLeader, CutLeader}
	if docker {
		kinds = []Kind{PauseMasters, KillDelayed, Cut, FreezeLeader, KillLeader, CutLeader}
	}
	w := ElectionWorkload{
		Name: "election: minority faults, leaders frozen, killed and cut off", Inside: true,
		Plan:      Plan{Kinds: kinds, Masters: 5, MaxFaulted: 2, Clients: 2, TTL: 500 * time.Millisecond, MasterTimeout: 50 * time.Millisecond},
		InProcess: 3, Subprocess: 2, Observers: 2, SubprocObservers: 1,
		HoldMax: 2 * time.Millisecond, Steps: 3, ProclaimEvery: 4, LapseEvery: 500,
	}
	if docker {
		w.Name += " (docker)"
	}
	if long {
		w.MinTerms = cmp.Or(*termsFlag, 100_000)
		w.Duration, w.MaxDuration = 10*time.Second, *electionMax
	} else {
		w.Duration, w.MaxDuration = 10*time.Second, 10*time.Second
	}
	w.Plan.Length = w.MaxDuration
	return w
}

// TestElection runs the election row inside the assumptions and the
// constructed rows outside them, asserts what each must show, and prints
// the table. make test runs the short row (10 s); make chaos-election
// (-chaos.long) runs it to 100 000 terms (-chaos.terms).
func TestElection(t *testing.T) {
	started := time.Now()
	var results []Result
	record := func(r Result) {
		r.Seed = seed
		visualise(t, &r, *electionJSON)
		results = append(results, r)
		t.Log(electionString(r))
	}
	w := electionWorkload(*long, *backend == "docker")
	t.Run("inside", func(t *testing.T) {
		for _, f := range NewSchedule(ScheduleRand(seed, w.Name), w.Plan) {
			t.Logf("schedule: %s", f)
		}
		r := RunElection(t, w, seed, *backend)
		record(r)
		ev := r.Election
		for i, fc := range ev.FailedCampaigns {
			if i == 20 {
				t.Logf("failed Campaigns: %d more in the JSON", len(ev.FailedCampaigns)-i)
				break
			}
			t.Logf("failed Campaign %d: %s", i+1, fc)
		}
		checkElectionAlways(t, r)
		if r.Overlaps != 0 || r.MutexOK != porcupine.Ok {
			t.Errorf("inside the assumptions: %d leader-sections entered while another leader was before its deadline (mutex model %s), want 0; first: %s", r.Overlaps, r.MutexOK, r.Example)
		}
		if r.FenceRegressions != 0 || r.FencedOK != porcupine.Ok || r.FenceReuse != 0 || ev.DuplicateTerms != 0 {
			t.Errorf("terms: %d regressions, %d reused, %d duplicate leaderships (fenced model %s); want 0, 0, 0 and Ok", r.FenceRegressions, r.FenceReuse, ev.DuplicateTerms, r.FencedOK)
		}
		if ev.Terms < w.MinTerms || ev.Terms == 0 {
			t.Errorf("%d terms, want ≥ %d (%.0f terms a second)", ev.Terms, max(w.MinTerms, 1), float64(ev.Terms)/r.Wall.Seconds())
		}
		if *long && (ev.Freezes == 0 || ev.Kills == 0 || ev.Cuts == 0 || r.Late == 0) {
			t.Errorf("leaders frozen %d, killed %d, cut %d, sections clipped at their deadline %d: the long run did not exercise every leader fault", ev.Freezes, ev.Kills, ev.Cuts, r.Late)
		}
		if *long && ev.LivenessViolations != 0 {
			t.Errorf("%d Campaigns failed at their limit (4 TTL) while the liveness bound's premise held (docs/design.md §21), want 0", ev.LivenessViolations)
		}
		if len(ev.Observers) != w.Observers+w.SubprocObservers {
			t.Errorf("%d observers were delivered anything, want %d", len(ev.Observers), w.Observers+w.SubprocObservers)
		}
	})
	constructed := []struct {
		name string
		run  func(testing.TB) Result
		// back: the term must go back; stale: the stale leader's write
		// must be rejected.
		back, stale bool
	}{
		{"restart-empty", ElectionRestartEmpty, true, false},
		{"clock-jump", ElectionClockJump, false, true},
		{"frozen-acts", ElectionFrozenActs, false, true},
	}
	for _, c := range constructed {
		t.Run(c.name, func(t *testing.T) {
			r := c.run(t)
			record(r)
			checkElectionAlways(t, r)
			if r.MutexOK != porcupine.Illegal || r.Overlaps < 1 || r.Porcupine != porcupine.Illegal {
				t.Errorf("checker missed the two leaders: mutex model %s, %d overlaps, porcupine %s", r.MutexOK, r.Overlaps, r.Porcupine)
			}
			if *electionJSON != "" && results[len(results)-1].Visualisation == "" {
				t.Errorf("no visualisation written for the failing row")
			}
			if c.back && (r.FenceRegressions < 1 || r.FencedOK != porcupine.Illegal) {
				t.Errorf("checker missed the term going back: %d regressions, fenced model %s", r.FenceRegressions, r.FencedOK)
			}
			if c.stale && r.StaleAttempted < 1 {
				t.Errorf("the stale leader's write was not rejected: %s", r.Notes)
			}
			if c.name == "frozen-acts" {
				if !strings.Contains(r.Notes, "B led after A's deadline: true") {
					t.Errorf("B led before A's deadline: %s", r.Notes)
				}
			} else if !strings.Contains(r.Notes, "at once: true") {
				t.Errorf("the two leaders were not both before their deadlines at once: %s", r.Notes)
			}
		})
	}

	var b bytes.Buffer
	ElectionTable(&b, results)
	fmt.Printf("chaos: election seed=%d long=%v wall=%v\n%s", seed, *long, time.Since(started).Round(time.Second), b.String())
	if *electionJSON != "" {
		cmd := "go test ./tests/chaos -count=1 -run 'TestElection$' -chaos.seed=" + fmt.Sprint(seed)
		if *long {
			cmd += " -chaos.long"
			if *termsFlag > 0 {
				cmd += fmt.Sprintf(" -chaos.terms %d", *termsFlag)
			}
		}
		s := Summary{Seed: seed, Long: *long, Started: started.UTC().Format(time.RFC3339), Command: cmd,
			Wall: time.Since(started).Round(time.Second).String(), Results: results}
		if *backend != "process" {
			s.Backend = *backend
			s.Command += " -chaos.backend " + *backend
		}
		if h, err := os.Hostname(); err == nil {
			s.Machine = fmt.Sprintf("%s: %d CPUs, %s/%s, %s", h, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
		}
		if err := WriteJSON(*electionJSON, s); err != nil {
			t.Error(err)
		}
	}
}

// checkElectionAlways is what every election row must show, inside the
// assumptions or not: checkAlways (the fenced resource never accepts a
// stale write, its log is a legal history, porcupine agrees with the
// sweep), and no observer is ever delivered an older term, the same
// leader twice in a row, or a value no campaigner published under that
// term.
func checkElectionAlways(t *testing.T, r Result) {
	t.Helper()
	checkAlways(t, r)
	ev := r.Election
	if ev.TermsBack != 0 || ev.Repeats != 0 || ev.Phantoms != 0 {
		t.Errorf("observers: %d terms back, %d repeats, %d phantoms; want 0 (%s)", ev.TermsBack, ev.Repeats, ev.Phantoms, ev.ObserveExample)
	}
	if ev.Deliveries == 0 {
		t.Errorf("no observer was delivered a leader")
	}
}

// CheckElection on handmade histories: it must flag two leaders at once,
// a term that goes back or repeats, and an observer delivered an older
// term, the same leader twice, or a leader nobody published; and pass a
// clean history.
func TestElectionChecker(t *testing.T) {
	sec := func(client int, seq int64, enter, exit int64, term uint64) Section {
		return Section{Client: client, Seq: seq, Resource: electionName, Enter: enter, Exit: exit, Fence: term}
	}
	pub := func(client int, v string, term uint64, at int64) Publication {
		return Publication{Client: client, Value: v, Term: term, At: at}
	}
	lead := func(client int, seq int64, term uint64, v string) Leadership {
		return Leadership{Client: client, Seq: seq, Term: term, Value: v}
	}
	del := func(o int, term uint64, v string, at int64) Delivery {
		return Delivery{Observer: o, Term: term, Value: v, At: at}
	}
	clean := func() *History {
		h := &History{}
		for _, p := range []Publication{pub(1, "a", 0, 0), pub(2, "b", 0, 5), pub(2, "b-p", 2, 15)} {
			h.addPublication(p)
		}
		for _, l := range []Leadership{lead(1, 1, 1, "a"), lead(2, 1, 2, "b")} {
			h.addLeadership(l)
		}
		h.addSection(sec(1, 1, 1, 10, 1))
		h.addSection(sec(2, 1, 11, 20, 2))
		for _, d := range []Delivery{del(100, 1, "a", 3), del(100, 2, "b", 12), del(100, 2, "b-p", 16), del(101, 2, "b-p", 17)} {
			h.addDelivery(d)
		}
		return h
	}
	type want struct {
		overlaps, regress, dup, back, repeats, phantoms int
		mutex, fenced                                   porcupine.CheckResult
	}
	ok := want{mutex: porcupine.Ok, fenced: porcupine.Ok}
	tests := []struct {
		name   string
		change func(h *History)
		want   want
	}{
		{"clean", func(*History) {}, ok},
		{"two leaders at once", func(h *History) { h.addSection(sec(3, 1, 15, 25, 3)) },
			want{overlaps: 1, mutex: porcupine.Illegal, fenced: porcupine.Illegal}},
		{"term goes back", func(h *History) { h.addSection(sec(3, 1, 30, 40, 1)) },
			want{regress: 1, mutex: porcupine.Ok, fenced: porcupine.Illegal}},
		{"two Campaigns, one term", func(h *History) { h.addLeadership(lead(3, 1, 2, "c")) },
			want{dup: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"observer goes back", func(h *History) { h.addDelivery(del(100, 1, "a", 30)) },
			want{back: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"observer repeats", func(h *History) { h.addDelivery(del(101, 2, "b-p", 30)) },
			want{repeats: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"phantom value", func(h *History) { h.addDelivery(del(101, 3, "zz", 30)) },
			want{phantoms: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"value under another term", func(h *History) { h.addDelivery(del(101, 3, "b-p", 30)) },
			want{phantoms: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"Campaign's value under a later term", func(h *History) { h.addDelivery(del(101, 3, "b", 30)) },
			want{phantoms: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"Campaign's value under another leader's term", func(h *History) { h.addDelivery(del(101, 1, "b", 6)) },
			want{phantoms: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
		{"delivered before published", func(h *History) {
			h.addPublication(pub(3, "c", 0, 50))
			h.addLeadership(lead(3, 1, 3, "c"))
			h.addDelivery(del(101, 3, "c", 40))
		}, want{phantoms: 1, mutex: porcupine.Ok, fenced: porcupine.Ok}},
	}
	// A term that no leader had, given back by the Campaign that then led
	// with the same value under a later one: no phantom, counted.
	t.Run("Campaign's value under a term it gave back", func(t *testing.T) {
		h := &History{}
		h.addPublication(pub(1, "a", 0, 0))
		h.addLeadership(lead(1, 1, 5, "a"))
		h.addSection(sec(1, 1, 20, 30, 5))
		h.addDelivery(del(100, 4, "a", 10))
		h.addDelivery(del(100, 5, "a", 21))
		_, ev := CheckElection(h)
		if ev.Phantoms != 0 || ev.TermsBack != 0 || ev.GivenBack != 1 {
			t.Errorf("%d phantoms, %d back, %d given back; want 0, 0, 1 (%s)", ev.Phantoms, ev.TermsBack, ev.GivenBack, ev.ObserveExample)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := clean()
			tt.change(h)
			v, ev := CheckElection(h)
			got := want{v.Overlaps, v.FenceRegressions, ev.DuplicateTerms, ev.TermsBack, ev.Repeats, ev.Phantoms, v.MutexOK, v.FencedOK}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v (%s %s)", got, tt.want, v.Example, ev.ObserveExample)
			}
		})
	}
}

// The election's schedule replays from its seed, faults at most a
// minority of masters, and lands its leader faults on campaigners that
// exist.
func TestElectionScheduleReplay(t *testing.T) {
	for _, docker := range []bool{false, true} {
		w := electionWorkload(true, docker)
		a := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
		b := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two schedules from seed %d differ (or are empty)", w.Name, seed)
		}
		kinds := map[Kind]int{}
		for _, f := range a {
			kinds[f.Kind]++
			if len(f.Masters) > w.Plan.MaxFaulted || f.Kind.onClient() && f.Client >= w.Subprocess {
				t.Errorf("%s: %s", w.Name, f)
			}
			if f.Kind == FreezeLeader && f.Dur < 2*w.Plan.TTL {
				t.Errorf("%s: %s: a freeze shorter than 2 TTL may not outlast the deadline", w.Name, f)
			}
		}
		for _, k := range w.Plan.Kinds {
			if kinds[k] == 0 {
				t.Errorf("%s: no %s in a long schedule", w.Name, k)
			}
		}
	}
}
