package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// Observe's loop reads the leader at once, without a pause first, then
// after each pause, and delivers each new leader and each new value of a
// leader, once.
func TestMutateObserveDelivers(t *testing.T) {
	l, _, clk := simDriverLocker(t, 3, &Options{Fencing: true, TTL: 10 * time.Second})
	e, err := l.Election("o")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := e.campaign(t.Context(), "a", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	clk.limit(6) // six polls after the first reading, then the loop ends
	var got []Leader
	e.observe(t.Context(), l.watch(e.t.key), func(lead Leader, _ time.Time) bool {
		got = append(got, lead)
		if len(got) == 1 {
			if err := e.Proclaim(t.Context(), "b"); err != nil { // a new value in the same term
				t.Error(err)
			}
		}
		return true
	})
	if len(got) != 2 || got[0].Value != "a" || got[1].Value != "b" || got[0].Term != lk.Fence() || got[1].Term != lk.Fence() {
		t.Errorf("Observe delivered %+v, want a then b in term %d, once each", got, lk.Fence())
	}
	if p := clk.pauses(); len(p) > 0 && p[0] == 0 {
		t.Errorf("Observe paused %v before its first reading, want none", p[0])
	}
}

// A lock kept in a context has ended once that context ends, and not
// before; a Keep after Context joins the keeper.
func TestMutateKeptLockEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	lk := &Lock{held: &lifetime{ctx: ctx}}
	if lk.ended() {
		t.Error("a lock kept in a live context has ended")
	}
	cancel()
	if !lk.ended() {
		t.Error("a lock kept in an ended context has not ended")
	}

	asleep := new(atomic.Int64)
	l, _, _ := simDriverLockerWith(t, 3, &Options{TTL: 10 * time.Second}, func(c *memClock) env { return gateEnv{memEnv{clk: c}, asleep} })
	k, err := l.TryLock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Unlock(context.Background())
	k.Context()
	if err := k.Keep(); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	joined := k.held != nil && k.held.joined
	k.mu.Unlock()
	if !joined {
		t.Error("a Keep after Context did not join the keeper")
	}
}

// A campaign whose lock its own Shutdown released while the value was
// being published returns ErrClosed, not a leadership. Shutdown begins
// when the first leader write reaches a master (the publish has entered:
// Shutdown does not stop it), and the masters refuse every command but
// the leader write from then on, so the publish succeeds on all of them
// while the release fails (election.go: `err == nil` of the check after
// publishLead negated, lived).
func TestMutateCampaignReleasedWhilePublishing(t *testing.T) {
	l, ms, _ := simDriverLocker(t, 5, &Options{Fencing: true, MasterTimeout: 20 * time.Millisecond, TTL: 10 * time.Second})
	write := sha(t, "leader_write.lua")
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	var begun atomic.Bool
	var once sync.Once
	refuse := func(args []string) bool {
		if !isScript(args, write) {
			return begun.Load()
		}
		once.Do(func() {
			l.live.mu.Lock()
			var lk *Lock
			for x := range l.live.locks {
				lk = x
			}
			l.live.mu.Unlock()
			begun.Store(true)
			go func() { shut <- l.Shutdown(context.WithoutCancel(t.Context())) }()
			eventually(t, "Shutdown released the campaign's lock", lk.isReleased)
		})
		return false
	}
	for _, m := range ms {
		m.refuseWith("", refuse)
	}
	lk, err := e.Campaign(t.Context(), "v")
	if !begun.Load() {
		t.Fatalf("Campaign: %v, %v; it never published", lk, err)
	}
	<-shut // it waits for the Campaign; its release was refused
	if lk != nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("Campaign whose lock Shutdown released during the publish: %v, %v; want no lock and ErrClosed", lk, err)
	}
}
