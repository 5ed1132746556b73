package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// electionOn counts the masters where lk holds the election's lock key
// and its record holds value.
func electionOn(t *testing.T, c *lab.Masters, name string, lk *redlock.Lock, value string) int {
	t.Helper()
	lock, record := "redlock:{"+name+"}:e", "redlock:{"+name+"}:e:leader"
	n := 0
	for i := range c.N() {
		cl := c.Client(i)
		rec, err := cl.HGetAll(t.Context(), record).Result()
		if err == nil && cl.Get(t.Context(), lock).Val() == lk.Token() && rec["token"] == lk.Token() && rec["value"] == value {
			n++
		}
	}
	return n
}

// settled waits until lk leads name on a majority of the masters (Campaign
// returns there), then up to a second for the others, and returns on how
// many it leads. Not always all: a campaigner handed the lock by a
// release on a majority does not take it on the other masters.
func settled(t *testing.T, c *lab.Masters, name string, lk *redlock.Lock, value string) int {
	t.Helper()
	waitFor(t, "the leader's keys on a majority of masters", func() bool { return electionOn(t, c, name, lk, value) >= 3 })
	for end := time.Now().Add(time.Second); electionOn(t, c, name, lk, value) < c.N() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	return electionOn(t, c, name, lk, value)
}

// setLeader writes, on master i, an election's lock key (token tok, with
// ttl) and its record, as a leader's Campaign leaves them.
func setLeader(t *testing.T, c *lab.Masters, i int, name, tok string, term int, value string, ttl time.Duration) {
	t.Helper()
	cl := c.Client(i)
	if err := cl.Set(t.Context(), "redlock:{"+name+"}:e", tok, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.HSet(t.Context(), "redlock:{"+name+"}:e:leader", "term", term, "token", tok, "value", value).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestElection: inspect and list show an election campaigned for with the
// library: per master the lock key's holder, PTTL, term and value; the
// leader a majority reports with its deadline (the majority-th largest
// PTTL); a paused master; the hand-over on Resign to a larger term; no
// leader after it, with the record that stays; and, from keys set by
// hand, the deadline rule, a holder that has not published and a view
// that the masters that did not answer could tip (exit 3).
func TestElection(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	masters := mastersFlag(c.Addrs())
	const ttl = 30 * time.Second
	ea, err := newLocker(t, c, redlock.Options{OwnerLabel: "sched-a:1", Fencing: true, TTL: ttl}).Election("scheduler")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ea.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the leader's keys on every master", func() bool { return electionOn(t, c, "scheduler", a, "10.0.0.1:8080") == 5 })
	var outputs []string
	tokens := []string{a.Token()}

	held := a.Deadline()
	code, out, errOut := cli(t, "inspect", "-json", "-masters", masters, "scheduler")
	after := time.Now()
	if code != exitOK {
		t.Fatalf("inspect: exit %d:\n%s", code, errOut)
	}
	outputs = append(outputs, out)
	res := decode[inspectResult](t, out)
	e := res.Election
	if e == nil || res.Quorum.Held || len(res.Quorum.Holders) != 0 || res.Primitives != nil {
		t.Fatalf("inspect scheduler: election %+v, mutex %+v, primitives %+v", e, res.Quorum, res.Primitives)
	}
	if e.Key != "redlock:{scheduler}:e" || e.RecordKey != "redlock:{scheduler}:e:leader" || e.FenceKey != "redlock:{scheduler}:e:fence" {
		t.Errorf("keys %q %q %q", e.Key, e.RecordKey, e.FenceKey)
	}
	l := e.Leader
	if l == nil || !e.Decided || e.Masters != 5 || e.Majority != 3 || e.Answered != 5 || e.LockOn != 5 || len(e.Reports) != 1 {
		t.Fatalf("election %+v", e)
	}
	if l.Value != "10.0.0.1:8080" || l.Term != a.Fence() || l.Holder != short(a.Token()) || l.Label != "sched-a:1" || l.On != 5 || l.NoExpiry {
		t.Errorf("leader %+v; want term %d of %s", l, a.Fence(), short(a.Token()))
	}
	// The keys outlive the leader's own deadline, and no key outlives a
	// TTL after the command.
	if l.Deadline == nil || l.DeadlineMs == nil || !l.Deadline.After(held) || l.Deadline.After(after.Add(ttl)) || *l.DeadlineMs <= 0 || *l.DeadlineMs > ttl.Milliseconds() {
		t.Errorf("deadline %v (%v ms); the leader's own %v", l.Deadline, l.DeadlineMs, held)
	}
	for i, em := range e.Nodes {
		if em.Addr != c.Addrs()[i] || !em.Answered || !em.Present || !em.Record || !em.Current || em.Holder != short(a.Token()) ||
			em.RecordHolder != short(a.Token()) || em.Term != a.Fence() || em.Value != "10.0.0.1:8080" || em.Fence == nil || *em.Fence != a.Fence() ||
			em.PTTLMs == nil || *em.PTTLMs <= 0 || em.Error != "" {
			t.Errorf("master %d: %+v", i, em)
		}
	}
	code, text, _ := cli(t, "inspect", "-masters", masters, "scheduler")
	outputs = append(outputs, text)
	want := `election: LEADER "10.0.0.1:8080", term ` + itoa(a.Fence()) + ", holder " + short(a.Token()) + ", reported by 5 of 5 masters (majority 3)"
	if code != exitOK || !strings.Contains(text, want) || !strings.Contains(text, "deadline in ") || !strings.Contains(text, "the 3rd largest remaining PTTL") ||
		!strings.Contains(text, "mutex: the key is on none of the 5 masters") || !strings.Contains(text, "the holder's") {
		t.Errorf("inspect text: exit %d, want %q in:\n%s", code, want, text)
	}

	// A paused master: the leader is on the four others.
	if err := c.Pause(4); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, "inspect", "-json", "-timeout", "300ms", "-masters", masters, "scheduler")
	c.ResumeAll()
	e = decode[inspectResult](t, out).Election
	if code != exitOK || e == nil || e.Leader == nil || e.Leader.On != 4 || e.Answered != 4 || e.Nodes[4].Answered || !strings.Contains(e.Nodes[4].Error, "unreachable") {
		t.Errorf("one master paused: exit %d, %+v\n%s", code, e, errOut)
	}

	// Another campaigner takes over on Resign, with a larger term; list
	// shows the election with kind "election", and no mutex.
	eb, err := newLocker(t, c, redlock.Options{OwnerLabel: "sched-b:2", Fencing: true, TTL: ttl}).Election("scheduler")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lk  *redlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		lk, err := eb.Campaign(ctx, "10.0.0.2:8080")
		got <- result{lk, err}
	}()
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	b := r.lk
	tokens = append(tokens, b.Token())
	on := settled(t, c, "scheduler", b, "10.0.0.2:8080")
	code, out, errOut = cli(t, "list", "-json", "-masters", masters)
	if code != exitOK {
		t.Fatalf("list: exit %d:\n%s", code, errOut)
	}
	outputs = append(outputs, out)
	lres := decode[listResult](t, out)
	if len(lres.Locks) != 0 || len(lres.Primitives) != 1 {
		t.Fatalf("list: locks %+v, primitives %+v", lres.Locks, lres.Primitives)
	}
	p := lres.Primitives[0]
	if p.Resource != "scheduler" || p.Stem != "redlock:{scheduler}" || strings.Join(p.Kinds, ",") != "election" || p.Election == nil ||
		p.Semaphore != nil || p.RWLock != nil || p.Election.Nodes != nil {
		t.Fatalf("list: %+v", p)
	}
	if l := p.Election.Leader; l == nil || l.Term != b.Fence() || b.Fence() <= a.Fence() || l.Value != "10.0.0.2:8080" || l.Holder != short(b.Token()) || l.On != on {
		t.Errorf("list: leader %+v; want term %d > %d of %s on %d", l, b.Fence(), a.Fence(), short(b.Token()), on)
	}
	code, text, _ = cli(t, "list", "-masters", masters)
	outputs = append(outputs, text)
	want = `scheduler  election  leader "10.0.0.2:8080", term ` + itoa(b.Fence()) + ", holder " + short(b.Token()) + " on " + strconv.Itoa(on) + "/5, deadline in "
	if code != exitOK || !strings.Contains(text, want) || strings.Contains(text, "no lock keys") {
		t.Errorf("list text: exit %d, want %q in:\n%s", code, want, text)
	}
	if code, out, _ := cli(t, "list", "-json", "-masters", masters, "other"); code != exitOK || len(decode[listResult](t, out).Primitives) != 0 {
		t.Errorf("list other: exit %d:\n%s", code, out)
	}

	// No leader after the last one resigns; the record stays.
	if err := eb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "inspect", "-json", "-masters", masters, "scheduler")
	e = decode[inspectResult](t, out).Election
	if code != exitOK || e == nil || e.Leader != nil || !e.Decided || e.LockOn != 0 || e.Last == nil || e.Last.Term != b.Fence() || e.Last.Value != "10.0.0.2:8080" || e.Last.On != on {
		t.Fatalf("after Resign: exit %d, %+v", code, e)
	}
	code, text, _ = cli(t, "inspect", "-masters", masters, "scheduler")
	outputs = append(outputs, text)
	if code != exitOK || !strings.Contains(text, "election: NO LEADER") || !strings.Contains(text, `last published: term `+itoa(b.Fence())+`, "10.0.0.2:8080"`) {
		t.Errorf("after Resign, text: exit %d:\n%s", code, text)
	}
	_, text, _ = cli(t, "list", "-masters", masters)
	if !strings.Contains(text, `scheduler  election  no leader; last published: term `+itoa(b.Fence())) {
		t.Errorf("after Resign, list:\n%s", text)
	}

	// By hand: a leader whose keys expire in 10s to 50s on the five
	// masters stands on a majority for the third largest, 30s.
	tZ := labelledToken(t, "host-z:9")
	tokens = append(tokens, tZ)
	for i := range 5 {
		setLeader(t, c, i, "jobs", tZ, 50, "z:1", time.Duration(10*(i+1))*time.Second)
	}
	_, out, _ = cli(t, "inspect", "-json", "-masters", masters, "jobs")
	e = decode[inspectResult](t, out).Election
	if e == nil || e.Leader == nil || e.Leader.Term != 50 || *e.Leader.DeadlineMs > 30000 || *e.Leader.DeadlineMs < 25000 {
		t.Errorf("the third largest PTTL: %+v", e)
	}
	// A holder that has not published (its token is not the record's).
	tY := labelledToken(t, "host-y:8")
	tokens = append(tokens, tY)
	for i := range 5 {
		c.Client(i).Set(ctx, "redlock:{jobs}:e", tY, time.Minute)
	}
	code, out, _ = cli(t, "inspect", "-json", "-masters", masters, "jobs")
	e = decode[inspectResult](t, out).Election
	if code != exitOK || e == nil || e.Leader != nil || !e.Decided || e.LockOn != 5 || e.LockHolder != short(tY) || e.Nodes[0].Current || e.Nodes[0].RecordHolder != short(tZ) {
		t.Errorf("unpublished holder: exit %d, %+v", code, e)
	}
	code, text, _ = cli(t, "inspect", "-masters", masters, "jobs")
	outputs = append(outputs, text)
	if code != exitOK || !strings.Contains(text, "the election's lock is held by "+short(tY)+" on 5 of 5 masters") || !strings.Contains(text, "by "+short(tZ)) {
		t.Errorf("unpublished holder, text: exit %d:\n%s", code, text)
	}
	// A leader on two of the three masters that answer: the two paused
	// could make it a majority (exit 3); the mutex view is settled.
	for i := range 2 {
		setLeader(t, c, i, "jobs", tZ, 50, "z:1", time.Minute)
	}
	for _, i := range []int{3, 4} {
		if err := c.Pause(i); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = cli(t, "inspect", "-json", "-timeout", "300ms", "-masters", masters, "jobs")
	c.ResumeAll()
	ir := decode[inspectResult](t, out)
	if code != exitQuorum || !ir.Quorum.Decided || ir.Election == nil || ir.Election.Decided || ir.Election.Leader != nil ||
		len(ir.Election.Reports) != 1 || ir.Election.Reports[0].On != 2 || !strings.Contains(errOut, `cannot tell who leads the election "jobs"`) {
		t.Errorf("undecided: exit %d, %+v\n%s", code, ir.Election, errOut)
	}
	code, out, _ = cli(t, "inspect", "-json", "-masters", masters, "jobs")
	if e := decode[inspectResult](t, out).Election; code != exitOK || !e.Decided || e.Leader != nil || len(e.Reports) != 1 {
		t.Errorf("two of five report a leader: exit %d, %+v", code, e)
	}
	noWholeToken(t, tokens, outputs...)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// The deadline is the majority-th latest expiry; a key without expiry is
// the latest of all.
func TestMajorityDeadline(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exp := func(s ...int) []time.Time {
		var out []time.Time
		for _, x := range s {
			if x < 0 {
				out = append(out, time.Time{})
			} else {
				out = append(out, at.Add(time.Duration(x)*time.Second))
			}
		}
		return out
	}
	for _, tc := range []struct {
		expires  []time.Time
		pttls    []int64
		need     int
		want     int64 // ms; -1: no expiry
		deadline time.Time
	}{
		{exp(10, 50, 30, 20, 40), []int64{10000, 50000, 30000, 20000, 40000}, 3, 30000, at.Add(30 * time.Second)},
		{exp(10, -1, 30), []int64{10000, -1, 30000}, 2, 30000, at.Add(30 * time.Second)},
		{exp(10, -1, -1), []int64{10000, -1, -1}, 2, -1, time.Time{}},
		{exp(7), []int64{7000}, 1, 7000, at.Add(7 * time.Second)},
	} {
		d, ms, none := majorityDeadline(tc.expires, tc.pttls, tc.need)
		switch {
		case tc.want < 0 && (!none || d != nil || ms != nil):
			t.Errorf("%v: %v %v %v, want no expiry", tc.pttls, d, ms, none)
		case tc.want >= 0 && (none || d == nil || *ms != tc.want || !d.Equal(tc.deadline)):
			t.Errorf("%v: %v %v %v, want %d ms", tc.pttls, d, ms, none, tc.want)
		}
	}
}
