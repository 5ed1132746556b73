package wait

import (
	"testing"
	"time"
)

// The edges of the machine's arithmetic, one decision at a time, from a
// state set by hand (checks that make mutate's mutants showed missing:
// docs/decisions/2026-12-06-mutation-testing.md).

// Every kind has its name; past the last, a number.
func TestKindNames(t *testing.T) {
	if Done.String() != "Done" || Round.String() != "Round" || Kind(Done+1).String() != "Kind(9)" {
		t.Fatalf("names: %q %q %q", Done.String(), Round.String(), Kind(Done+1).String())
	}
}

// A poll that finds the key held rejoins the queue every fourth time (a
// lost member is put back), and sleeps on the other three.
func TestEveryFourthHeldPollRejoins(t *testing.T) {
	for probes, wantJoin := range map[int]bool{0: false, 1: false, 2: false, 3: true, 4: false, 7: true} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true}), f)
		m.st, m.probes, m.joined, m.held = stPollProbe, probes, true, true
		a := m.ProbeDone(t0, false, time.Time{})
		if got := a.Kind == Join; got != wantJoin {
			t.Errorf("held poll number %d: %v, want a rejoin %v", probes+1, a.Kind, wantJoin)
		}
		if m.probes != probes+1 {
			t.Errorf("held poll number %d: probes %d after it, want %d", probes+1, m.probes, probes+1)
		}
	}
}

// Woken by a release that named nobody, the rank decides: behind the
// head (rank > 1) the waiter sleeps on at its place; at the head (1) or
// off the queue (0) it makes its round.
func TestWokenRankBehindTheHeadSleeps(t *testing.T) {
	for r, want := range map[uint64]Kind{0: Round, 1: Round, 2: Sleep, 3: Sleep} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true}), f)
		m.st, m.round, m.woke = stWokenRank, true, true
		a := m.RankDone(t0, r)
		if a.Kind != want {
			t.Errorf("woken, rank %d: %v, want %v", r, a.Kind, want)
		}
		if want == Sleep && m.behind != r {
			t.Errorf("woken, rank %d: behind %d, want %d", r, m.behind, r)
		}
	}
}

// A queued waiter that polled the holder and found it held backs off by
// its attempts, the queued steps and its polls so far.
func TestQueuedBackoffCountsPolls(t *testing.T) {
	for _, probes := range []int{0, 2, 5} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true}), f)
		m.attempt, m.joined, m.held, m.probes = 1, true, true, probes
		m.sleep(t0)
		if got := f.backoffN[len(f.backoffN)-1]; got != 1+QueuedSteps+probes {
			t.Errorf("%d polls: backoff asked for step %d, want %d", probes, got, 1+QueuedSteps+probes)
		}
	}
}

// The sleep ends at the holder's expiry only when that is sooner than
// the backoff; an expiry exactly at the backoff is not "expiring", and
// one already past sleeps 0.
func TestSleepUntilTheExpiryOnlyWhenSooner(t *testing.T) {
	for _, c := range []struct {
		in       time.Duration
		delay    time.Duration
		expiring bool
	}{
		{time.Second, time.Second, false},
		{time.Second - time.Nanosecond, time.Second - time.Nanosecond, true},
		{-time.Millisecond, 0, true},
		{2 * time.Second, time.Second, false},
	} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true}), f)
		m.attempt, m.expires = 1, t0.Add(c.in)
		a := m.sleep(t0)
		if a.Delay != c.delay || m.expiring != c.expiring || !m.expires.IsZero() {
			t.Errorf("expiry in %v, backoff 1s: delay %v expiring %v, want %v %v (and the expiry used up)", c.in, a.Delay, m.expiring, c.delay, c.expiring)
		}
	}
}

// A round that found the waiter at the head (place 1: rank 0 plus one) or
// off the queue is an attempt like any other; only a place behind the
// head (> 1) is not counted.
func TestRoundAtTheHeadCounts(t *testing.T) {
	for place, wantAttempts := range map[uint64]int{0: 1, 1: 1, 2: 0} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true, Writer: true}), f)
		m.Start(t0, false, false)
		m.RoundDone(t0, RoundResult{Place: place})
		if m.Attempts() != wantAttempts {
			t.Errorf("round refused at place %d: %d attempts, want %d", place, m.Attempts(), wantAttempts)
		}
	}
}

// The rank read by a poll that found the key free: off the queue (0) or
// at the head of an expiring holder's queue, a round; at the head
// otherwise, suspect (sleep once more); behind the head, its place (a
// round only once the queue has not moved since the last poll).
func TestPolledRank(t *testing.T) {
	for _, c := range []struct {
		rank, behind uint64
		expiring     bool
		want         Kind
		wantBehind   uint64
		wantSuspect  bool
	}{
		{0, 0, false, Round, 0, false},
		{0, 2, false, Round, 0, false},
		{1, 0, true, Round, 0, false},
		{1, 0, false, Sleep, 0, true},
		{2, 0, false, Sleep, 2, false},
		{2, 3, false, Sleep, 2, false},
		{3, 3, false, Round, 0, false},
		{3, 2, false, Round, 0, false},
	} {
		f := &fakeLocal{backoff: time.Second}
		m := New(cfg(Target{Queued: true}), f)
		m.st, m.round, m.joined, m.held, m.behind, m.expiring = stPollRank, true, true, true, c.behind, c.expiring
		a := m.RankDone(t0, c.rank)
		if a.Kind != c.want || m.behind != c.wantBehind || m.suspect != c.wantSuspect {
			t.Errorf("rank %d, behind %d, expiring %v: %v behind %d suspect %v, want %v behind %d suspect %v",
				c.rank, c.behind, c.expiring, a.Kind, m.behind, m.suspect, c.want, c.wantBehind, c.wantSuspect)
		}
	}
}
