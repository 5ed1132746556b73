package redlocktest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/redlocktest"
)

// leadsOn counts the masters where Leaders reports lk's term and value.
func leadsOn(m *redlocktest.Masters, l *redlock.Locker, name string, lk *redlock.Lock, value string) int {
	n := 0
	for _, ld := range m.Leaders(l, name) {
		if ld.Token == lk.Token() && ld.Term == lk.Fence() && ld.Value == value {
			n++
		}
	}
	return n
}

// Elections run on redlocktest's masters: leader_write.lua and
// leader_read.lua (redis.sha1hex, PUBLISH from a script) run on miniredis;
// Leaders and Holding see the leadership; an observer follows Campaign,
// Proclaim and a hand-over on Resign, with a minority stalled; FastForward
// past the TTL takes the leader's keys away, its Done closes, and the
// next campaigner leads with a larger term.
func TestElection(t *testing.T) {
	m := redlocktest.New(t, nil)
	const ttl = 3 * time.Second
	newElection := func() (*redlock.Locker, *redlock.Election) {
		// A MasterTimeout for a cold Locker's first round under -race
		// (identifying each master, loading the scripts into miniredis).
		l := newLocker(t, m, redlock.Options{Fencing: true, TTL: ttl, MasterTimeout: time.Second})
		e, err := l.Election("scheduler")
		must(t, err)
		return l, e
	}
	la, ea := newElection()
	lb, eb := newElection()
	_, reader := newElection()
	warm(t, m, la)
	warm(t, m, lb)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// The record's channel gets leader_write.lua's PUBLISH.
	sub := m.Clients()[0].Subscribe(ctx, "redlock:{scheduler}:e:leader")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	observed := reader.Observe(ctx)
	must(t, m.Stall(4))
	a, err := ea.Campaign(ctx, "a:8080")
	must(t, err)
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != strconv.FormatUint(a.Fence(), 10) {
		t.Fatalf("the record's channel: %+v, %v; want the term %d", msg, err, a.Fence())
	}
	eventually(t, "the leader on the four live masters", func() bool { return leadsOn(m, la, "scheduler", a, "a:8080") == 4 })
	if ld := m.Leaders(la, "scheduler")[4]; ld != (redlocktest.Leader{}) {
		t.Fatalf("the stalled master: %+v, want no leader", ld)
	}
	if n := m.Holding(la, a); n != 4 {
		t.Fatalf("Holding(leadership) = %d, want 4", n)
	}
	got, err := reader.Leader(ctx)
	if err != nil || got.Term != a.Fence() || got.Value != "a:8080" {
		t.Fatalf("Leader() = %+v, %v", got, err)
	}
	next := func(what string) redlock.Leader {
		t.Helper()
		select {
		case l := <-observed:
			return l
		case <-ctx.Done():
			t.Fatalf("the observer did not see %s", what)
		}
		return redlock.Leader{}
	}
	if l := next("the first leader"); l.Term != a.Fence() || l.Value != "a:8080" {
		t.Fatalf("observed %+v", l)
	}
	must(t, ea.Proclaim(ctx, "a:9090"))
	if l := next("the proclaimed value"); l.Term != a.Fence() || l.Value != "a:9090" {
		t.Fatalf("observed after Proclaim %+v", l)
	}
	must(t, m.Resume(4))

	// Resign hands over to the waiting campaigner, with a larger term.
	type result struct {
		lk  *redlock.Lock
		err error
	}
	campaign := func(e *redlock.Election, value string) <-chan result {
		c := make(chan result, 1)
		go func() {
			lk, err := e.Campaign(ctx, value)
			c <- result{lk, err}
		}()
		return c
	}
	waiting := campaign(eb, "b:8080")
	must(t, ea.Resign(ctx))
	r := <-waiting
	must(t, r.err)
	b := r.lk
	if b.Fence() <= a.Fence() {
		t.Fatalf("term %d after %d", b.Fence(), a.Fence())
	}
	if l := next("the second leader"); l.Term != b.Fence() || l.Value != "b:8080" {
		t.Fatalf("observed %+v", l)
	}
	eventually(t, "the second leader on a majority", func() bool { return leadsOn(m, lb, "scheduler", b, "b:8080") >= 3 })

	// FastForward past the TTL: the masters lose the leader's keys (the
	// record stays). Its keeper's next extension fails and Done closes;
	// the next campaigner leads with a larger term.
	m.FastForward(ttl + time.Second)
	for i, ld := range m.Leaders(lb, "scheduler") {
		if ld.Token != "" {
			t.Fatalf("master %d after FastForward: %+v", i, ld)
		}
	}
	if _, err := reader.Leader(ctx); !errors.Is(err, redlock.ErrNoLeader) {
		t.Fatalf("Leader() after FastForward: %v, want ErrNoLeader", err)
	}
	select {
	case <-b.Done():
		if !errors.Is(b.Err(), redlock.ErrLost) {
			t.Fatalf("the leadership ended with %v, want ErrLost", b.Err())
		}
	case <-ctx.Done():
		t.Fatal("the leadership's Done did not close after its keys were fast-forwarded away")
	}
	if err := eb.Proclaim(ctx, "b:9090"); !errors.Is(err, redlock.ErrLost) {
		t.Fatalf("Proclaim after the loss: %v, want ErrLost", err)
	}
	r = <-campaign(ea, "a:8080")
	must(t, r.err)
	if r.lk.Fence() <= b.Fence() {
		t.Fatalf("term %d after %d", r.lk.Fence(), b.Fence())
	}
	if l := next("the third leader"); l.Term != r.lk.Fence() || l.Value != "a:8080" {
		t.Fatalf("observed %+v", l)
	}
	must(t, ea.Resign(ctx))
	cancel()
	for range observed {
	}
}
