package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/quorum"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
)

// The checks here decide what a call refuses, or how New builds a
// Locker, before any round: they need no master, so they run in make
// mutate's fast set (scripts/mutate.sh) beside the simulator. Each names
// the mutant of gremlins' that lived without it.

// offlineLocker is a Locker over n go-redis clients of addresses nobody
// listens on (New contacts nothing). Closed at the test's end.
func offlineLocker(t *testing.T, n int, o *Options) *Locker {
	t.Helper()
	clients := make([]redis.UniversalClient, n)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i), MaxRetries: -1})
	}
	l, err := New(clients, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		for _, c := range clients {
			c.Close()
		}
	})
	return l
}

// A value of exactly the limit is taken; one byte more is ErrInvalid,
// for Campaign and Proclaim alike (election.go: `len(value) >
// maxValueLen` made `>=` lived). Proclaim's context is checked, and an
// Election that does not lead is told so (ErrLost) without a round.
func TestMutateElectionValueLimitAndNotLeading(t *testing.T) {
	l := offlineLocker(t, 3, &Options{Fencing: true})
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	at, over := strings.Repeat("v", maxValueLen), strings.Repeat("v", maxValueLen+1)
	ctx := t.Context()
	if err := e.Proclaim(ctx, at); !errors.Is(err, ErrLost) || errors.Is(err, ErrInvalid) {
		t.Errorf("Proclaim of a %d-byte value by a non-leader: %v, want ErrLost", maxValueLen, err)
	}
	if err := e.Proclaim(ctx, over); !errors.Is(err, ErrInvalid) {
		t.Errorf("Proclaim of a %d-byte value: %v, want ErrInvalid", maxValueLen+1, err)
	}
	if err := e.Proclaim(nil, at); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Proclaim with a nil context: %v, want ErrInvalid", err)
	}
	if _, err := e.Campaign(ctx, over); !errors.Is(err, ErrInvalid) {
		t.Errorf("Campaign with a %d-byte value: %v, want ErrInvalid", maxValueLen+1, err)
	}
	// A canceled context: the wait ends before a round. It names no lock
	// given back, for none was taken.
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Campaign(done, at)
	if err == nil || errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "given back") {
		t.Errorf("Campaign of a %d-byte value, context canceled: %v, want its wait's end and no give-back", maxValueLen, err)
	}
	l.Close()
	if _, err := e.Campaign(ctx, at); !errors.Is(err, ErrClosed) {
		t.Errorf("Campaign after Close: %v, want ErrClosed", err)
	}
}

// fakeMaster is a driver.Master on the client path that answers nothing.
type fakeMaster struct{ addr string }

func (f *fakeMaster) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	return nil, errors.New("fakeMaster: no server")
}
func (f *fakeMaster) Addr() string { return f.addr }

// NewMasters refuses two masters of the client path with one address,
// and takes two with none (locker.go: the conditions of New's check for
// one server under two names lived negated).
func TestMutateNewMastersSameAddress(t *testing.T) {
	l, err := NewMasters([]driver.Master{&fakeMaster{"h:1"}, &fakeMaster{""}, &fakeMaster{""}}, nil)
	if err != nil {
		t.Fatalf("two masters without an address: %v, want a Locker", err)
	}
	l.Close()
	if _, err := NewMasters([]driver.Master{&fakeMaster{"h:1"}, &fakeMaster{"H:01"}, &fakeMaster{"h:2"}}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("two masters named h:1 and H:01: %v, want ErrInvalid", err)
	}
}

// New warns, once, about fewer than three masters or an even number of
// them, and not about three or five (locker.go's warnMasterCount: its
// conditions lived mutated).
func TestMutateNewWarnsAboutMasterCount(t *testing.T) {
	for n, warn := range map[int]bool{1: true, 2: true, 3: false, 4: true, 5: false} {
		var buf bytes.Buffer
		offlineLocker(t, n, &Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if got := strings.Contains(buf.String(), "master"); got != warn {
			t.Errorf("%d masters: warned %v (%q), want %v", n, got, buf.String(), warn)
		}
	}
}

// failingMeter fails to create counters, as a broken meter provider can.
type failingMeter struct{ noopmetric.Meter }

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("failingMeter: no counters")
}

type failingMeterProvider struct{ noopmetric.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

// New returns the error of a meter provider that cannot create the
// Locker's instruments, and no Locker (locker.go: `err != nil` after
// newTelemetry lived negated).
func TestMutateNewReturnsTelemetryErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	l, err := New([]redis.UniversalClient{c}, &Options{MeterProvider: failingMeterProvider{}})
	if err == nil || l != nil {
		t.Fatalf("New with a failing meter provider: %v, %v; want an error and no Locker", l, err)
	}
}

// A Leader round's tally (Election.leaderOf), with no master: the leader
// named alike by a majority of the masters that answered OK, its
// Deadline the need-th latest expiry among them; no leader when the
// majority is split or short, with the reason that says which; the
// context's cause only when the round ended by it. (election.go: the
// tally's conditions lived mutated; the simulator counts only the
// readings that succeed.)
func TestMutateLeaderTally(t *testing.T) {
	e := &Election{l: &Locker{need: 3, addrs: make([]string, 5), env: sysEnv{}}, name: "e"}
	start := time.Unix(1000, 0)
	ok := func(lat time.Duration) quorum.Reply { return quorum.Reply{Outcome: quorum.OK, Latency: lat} }
	res := func(rs ...quorum.Reply) quorum.Result {
		r := quorum.Result{Replies: rs, Need: 3}
		for _, x := range rs {
			if x.Outcome == quorum.OK {
				r.OK++
			}
		}
		r.Reached = r.OK >= 3
		return r
	}
	timeout := quorum.Reply{Outcome: quorum.TimedOut}
	rec := func(ms, term int, digest, value string) string {
		return fmt.Sprintf("2 %d %d %s %s", ms, term, digest, value)
	}
	ctx := t.Context()

	// Three of five name term 7 ("v w", a value with a space); expiries at
	// start+lat+pttl: 1.1 s, 1.2 s, 0.9 s: the third latest is 0.9 s.
	r := res(ok(100*time.Millisecond), ok(200*time.Millisecond), ok(0), ok(0), quorum.Reply{Outcome: quorum.Failed})
	reads := []string{rec(1000, 7, "d", "v w"), rec(1000, 7, "d", "v w"), rec(900, 7, "d", "v w"), rec(5000, 6, "c", "old"), rec(5000, 7, "d", "v w")}
	lead, err := e.leaderOf(ctx, r, reads, start)
	if err != nil || lead.Term != 7 || lead.Value != "v w" || !lead.Deadline.Equal(start.Add(900*time.Millisecond)) {
		t.Errorf("three of five name term 7: %+v, %v; want term 7, value \"v w\", deadline start+900ms (the Failed master's read does not count)", lead, err)
	}
	// The first reply's vote must gather the others' (index 0 found).
	r = res(ok(0), ok(0), ok(0), timeout, timeout)
	reads = []string{rec(1000, 7, "d", "v"), rec(1000, 7, "d", "v"), rec(1000, 7, "d", "v"), "", ""}
	if lead, err := e.leaderOf(ctx, r, reads, start); err != nil || lead.Term != 7 {
		t.Errorf("exactly a majority names term 7: %+v, %v", lead, err)
	}
	// A majority split on the term, the token or the value: no leader;
	// every master answered, so the reason is not a short answer.
	for name, third := range map[string]string{"term": rec(1000, 8, "d", "v"), "digest": rec(1000, 7, "x", "v"), "value": rec(1000, 7, "d", "u")} {
		reads = []string{rec(1000, 7, "d", "v"), rec(1000, 7, "d", "v"), third, "", ""}
		_, err := e.leaderOf(ctx, res(ok(0), ok(0), ok(0), timeout, timeout), reads, start)
		if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "no leader is reported by a majority") {
			t.Errorf("a majority split on the %s: %v, want ErrNoLeader, no leader reported by a majority", name, err)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("a round not ended by its context: %v wraps context.Canceled", err)
		}
	}
	// Two answered: short of a majority, whatever they say.
	reads = []string{rec(1000, 7, "d", "v"), rec(1000, 7, "d", "v"), "", "", ""}
	_, err = e.leaderOf(ctx, res(ok(0), ok(0), timeout, timeout, timeout), reads, start)
	if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "fewer than a majority of masters answered") {
		t.Errorf("two of five answered: %v, want fewer than a majority answered", err)
	}
	// A round its context ended wraps the context's cause.
	done, cancel := context.WithCancel(ctx)
	cancel()
	r = res(ok(0), timeout, timeout, timeout, timeout)
	r.Err = context.Canceled
	if _, err := e.leaderOf(done, r, []string{"", "", "", "", ""}, start); !errors.Is(err, context.Canceled) {
		t.Errorf("a round ended by its context: %v, want it wrapping context.Canceled", err)
	}
}

// parseLeaderRead takes only a holder's record ("2 <pttl> <term>
// <digest> <value>", the value with spaces), with a pttl of 0 or more in
// ms. (election.go: its conditions and its ms-to-Duration lived mutated.)
func TestMutateParseLeaderRead(t *testing.T) {
	for _, c := range []struct {
		in    string
		ok    bool
		term  uint64
		value string
		pttl  time.Duration
	}{
		{"2 1500 7 d v", true, 7, "v", 1500 * time.Millisecond},
		{"2 0 7 d a b", true, 7, "a b", 0},
		{"1 1500 7 d v", false, 0, "", 0},
		{"2 1500 7 d", false, 0, "", 0},
		{"2 -1 7 d v", false, 0, "", 0},
		{"2 x 7 d v", false, 0, "", 0},
		{"2 1500 y d v", false, 0, "", 0},
		{"0", false, 0, "", 0},
	} {
		term, digest, value, pttl, ok := parseLeaderRead(c.in)
		if ok != c.ok || ok && (term != c.term || digest != "d" || value != c.value || pttl != c.pttl) {
			t.Errorf("parseLeaderRead(%q) = %d %q %q %v %v, want ok %v term %d value %q pttl %v", c.in, term, digest, value, pttl, ok, c.ok, c.term, c.value, c.pttl)
		}
	}
}

// Observe polls every quarter of the TTL, at least every 50 ms and at
// most every second. (election.go: observePoll's arithmetic lived
// mutated.)
func TestMutateObservePoll(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{time.Second: 250 * time.Millisecond, 100 * time.Millisecond: 50 * time.Millisecond, 10 * time.Second: time.Second} {
		e := &Election{l: &Locker{opts: Options{TTL: ttl}}}
		if got := e.observePoll(); got != want {
			t.Errorf("TTL %v: polls every %v, want %v", ttl, got, want)
		}
	}
}

// Leader checks its context, and a closed Locker's Leader says so.
func TestMutateLeaderRefuses(t *testing.T) {
	l := offlineLocker(t, 3, &Options{Fencing: true})
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(nil); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Leader with a nil context: %v, want ErrInvalid", err)
	}
	l.Close()
	if _, err := e.Leader(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Leader after Close: %v, want ErrClosed", err)
	}
}

// A publish that fell short says why: the leadership's key another
// owner's on more masters than a majority can spare, or no majority in
// time; and wraps the context's cause only when the context ended the
// round. (election.go: publishFailed's conditions lived mutated.)
func TestMutatePublishFailed(t *testing.T) {
	e := &Election{l: &Locker{need: 3, addrs: make([]string, 5), env: sysEnv{}}, name: "e"}
	out := func(os ...quorum.Outcome) quorum.Result {
		r := quorum.Result{Need: 3}
		for _, o := range os {
			r.Replies = append(r.Replies, quorum.Reply{Outcome: o})
		}
		return r
	}
	ok, no, late := quorum.OK, quorum.Refused, quorum.TimedOut
	const owner, short = "another owner's", "no majority of masters took the value"
	for _, c := range []struct {
		res  quorum.Result
		want string
	}{
		{out(no, no, no, ok, ok), owner},   // 3 refused: more than the 2 five masters can spare
		{out(no, no, ok, ok, late), short}, // 2 refused: a majority could still have taken it
		{out(ok, ok, late, late, late), short},
	} {
		err := e.publishFailed(t.Context(), c.res)
		if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), c.want) || errors.Is(err, context.Canceled) {
			t.Errorf("%v: %v, want ErrLost saying %q and no context cause", c.res.Replies, err, c.want)
		}
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	r := out(ok, late, late, late, late)
	r.Err = context.Canceled
	if err := e.publishFailed(done, r); !errors.Is(err, context.Canceled) {
		t.Errorf("a publish its context ended: %v, want it wrapping context.Canceled", err)
	}
}
