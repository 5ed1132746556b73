package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The election's publish on in-memory masters (simDriver, mutate_mem_test.go) whose
// leader writes are refused: how many publish rounds a campaign makes,
// and how long it pauses between them and between campaigns.

// refusedPublishes is a Locker of 5 masters, 3 of them refusing every
// leader write, with MasterTimeout mt and TTL ttl. drift is the
// DriftFactor (0: the default).
func refusedPublishes(t *testing.T, mt, ttl time.Duration, drift float64) (*Election, *memClock) {
	t.Helper()
	l, ms, clk := simDriverLocker(t, 5, &Options{Fencing: true, MasterTimeout: mt, TTL: ttl, DriftFactor: drift})
	write := sha(t, "leader_write.lua")
	for i, m := range ms {
		m.refuseWith("", func(args []string) bool { return i < 3 && isScript(args, write) })
	}
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	return e, clk
}

// A campaign publishes in publishAttempts rounds a MasterTimeout apart,
// then gives the lock back and campaigns again after the backoff of its
// attempt, MinDelay·2^(n−1) drawn in [d/2, d] (election.go: the
// campaign's and the publish's attempt++ made --, the retry's conditions
// negated, lived).
func TestMutateCampaignPublishRetries(t *testing.T) {
	mt := 20 * time.Millisecond
	e, clk := refusedPublishes(t, mt, 10*time.Second, 0)
	clk.limit(11) // MT, MT, backoff(n) for n = 1..3, then the fourth campaign's MT, MT; its backoff ends it
	_, err := e.campaign(t.Context(), "v", false, nil)
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Campaign whose publishes are refused on a majority: %v, want ErrLost", err)
	}
	// The pauses say how many rounds there were (the writes a master was
	// sent do not: one whose answer a loaded machine delays past the
	// pauses, which take no time here, is skipped by the next round).
	p := clk.pauses()
	if len(p) != 11 {
		t.Fatalf("pauses %v, want 11", p)
	}
	for n := range 4 {
		for k := range 2 {
			if got := p[3*n+k]; got != mt {
				t.Errorf("campaign %d, pause %d between publishes: %v, want MasterTimeout %v", n+1, k+1, got, mt)
			}
		}
		if n == 3 {
			break
		}
		d := defaultMinDelay << n
		if got := p[3*n+2]; got < d/2 || got > d {
			t.Errorf("pause after campaign %d: %v, want in [%v, %v]", n+1, got, d/2, d)
		}
	}
}

// The publish stops once the lock has 2·MasterTimeout or less to run, and
// pauses while it has more: with a validity of exactly 3 MasterTimeouts it
// makes two rounds and then gives the lock back, the second pause being
// the campaign's backoff (election.go: `<= 2*pause` made `<` or `2/pause`
// lived).
func TestMutatePublishStopsNearTheDeadline(t *testing.T) {
	// The validity a lock of this TTL gets at once (no time passes in a
	// round here), for a TTL that makes it a multiple of 3 ns (with the
	// default DriftFactor each millisecond of TTL adds 990 µs, which
	// leaves the remainder by 3 ns as it was: 0.02 moves it).
	var left time.Duration
	for ttl := 300 * time.Millisecond; left == 0 || left%3 != 0; ttl += time.Millisecond {
		if ttl > time.Second {
			t.Fatal("no TTL up to 1s gives a validity divisible by 3")
		}
		e, _ := refusedPublishes(t, time.Millisecond, ttl, 0.02)
		lk, err := e.l.lock(context.Background(), "Campaign", e.t, nil)
		if err != nil {
			t.Fatal(err)
		}
		left = lk.Deadline().Sub(e.l.env.now())
		lk.Unlock(context.Background())
		if left%3 == 0 {
			mt := left / 3
			e, clk := refusedPublishes(t, mt, ttl, 0.02)
			clk.limit(2)
			if _, err := e.campaign(t.Context(), "v", false, nil); !errors.Is(err, ErrLost) {
				t.Fatalf("Campaign: %v, want ErrLost", err)
			}
			p := clk.pauses()
			if len(p) != 2 || p[0] != mt || p[1] > defaultMinDelay || p[1] < defaultMinDelay/2 {
				t.Errorf("validity %v, MasterTimeout %v: pauses %v, want [%v, the backoff in [%v, %v]]", left, mt, p, mt, defaultMinDelay/2, defaultMinDelay)
			}
		}
	}
}
