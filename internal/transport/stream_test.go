package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The stream alone, with commands of the test's own (the Locker's, over
// the same stream, are package redlock's stream_mem_test.go): the test is
// the master. It sees every write, answers with Answer as a link's reader
// would, and passes the clock to Submit and Answer.

// testCmd is a command that records what became of it.
type testCmd struct {
	name   string
	parks  bool
	resend bool // sent again after a NOSCRIPT
	out    chan string
}

func newCmd(name string, parks bool) *testCmd {
	return &testCmd{name: name, parks: parks, out: make(chan string, 4)}
}

func (c *testCmd) Args(dst []Arg) []Arg { return append(dst, Str(c.name)) }
func (c *testCmd) Key() string          { return c.name }
func (c *testCmd) Parks() bool          { return c.parks }
func (c *testCmd) Park()                { c.out <- "parked" }
func (c *testCmd) Answer(r Raw, _ time.Time) {
	c.out <- fmt.Sprintf("%c%s", r.Type, r.Text)
}
func (c *testCmd) Done(rep quorum.Reply, _ time.Time) { c.out <- rep.Outcome.String() }
func (c *testCmd) Resend(func(func(Command) bool) bool) bool {
	again := c.resend
	c.resend = false
	return again
}

// outcome is what became of c (waiting up to 10 s: a hang fails).
func (c *testCmd) outcome(t *testing.T) string {
	t.Helper()
	select {
	case o := <-c.out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no outcome", c.name)
		return ""
	}
}

// testEnv is production's clock, for a stream whose flusher runs.
type testEnv struct{}

func (testEnv) Now() time.Time                                      { return time.Now() }
func (testEnv) AfterFunc(d time.Duration, f func()) Stopper         { return time.AfterFunc(d, f) }
func (testEnv) AfterDone(ctx context.Context, f func()) func() bool { return context.AfterFunc(ctx, f) }
func (testEnv) Detached() bool                                      { return false }
func (testEnv) Later(f func())                                      { go f() }

type noClaims struct{}

func (noClaims) Claim(int, string, bool) error { return nil }

// testLink hands each write to the test.
type testLink struct{ writes chan []string }

func (k *testLink) Write(batch []Command) error {
	var names []string
	for _, c := range batch {
		names = append(names, c.Args(nil)[0].String())
	}
	k.writes <- names
	return nil
}
func (k *testLink) Direct() bool { return true }
func (k *testLink) Close()       {}

func (k *testLink) next(t *testing.T) string {
	t.Helper()
	select {
	case w := <-k.writes:
		return fmt.Sprint(w)
	case <-time.After(10 * time.Second):
		t.Fatal("no write")
		return ""
	}
}

const testTimeout = time.Minute // the probe never fires during a test

func newTestStream(t *testing.T) (*Stream, *testLink) {
	t.Helper()
	ln := &testLink{writes: make(chan []string, 16)}
	var dials atomic.Int32
	proto := &Protocol{
		Scripts: []string{"return 1", "return 2"},
		Load:    func(i int) Command { return newCmd(fmt.Sprint("load", i), false) },
		Refusal: func(string, string) error { return nil },
		Invalid: func(error) bool { return false },
	}
	cfg := &Config{Addr: "test", NodeTimeout: testTimeout, Log: slog.New(slog.DiscardHandler), IDs: noClaims{}, Tried: &atomic.Int32{}, Env: testEnv{}, Proto: proto}
	s := NewStream(cfg, func() (Link, string, error) {
		if dials.Add(1) > 1 {
			return nil, "", errors.New("one dial only")
		}
		return ln, "", nil
	}, 0)
	t.Cleanup(s.Close)
	return s, ln
}

// Replies go to commands in the order they were written; a master that
// does not answer within NodeTimeout is skipped, a parking command parked
// and written after everything before it once the master answers.
func TestStreamOrderAndParking(t *testing.T) {
	s, ln := newTestStream(t)
	t0 := time.Now()
	a := newCmd("a", false)
	if got := s.Submit(a, t0); got != Sent {
		t.Fatalf("first submit: %v", got)
	}
	if w := ln.next(t); w != "[a]" {
		t.Fatalf("wrote %s, want [a]", w)
	}
	s.Answer(ln, Raw{Type: '+', Text: "OK"}, t0)
	if o := a.outcome(t); o != "+OK" {
		t.Fatalf("a: %s", o)
	}
	for s.Writing() {
		time.Sleep(time.Millisecond)
	}
	b := newCmd("b", false)
	s.Submit(b, t0) // a lone caller writes itself
	if w := ln.next(t); w != "[b]" {
		t.Fatalf("wrote %s, want [b]", w)
	}
	late := t0.Add(testTimeout + time.Second)
	if got := s.Submit(newCmd("c", false), late); got != Refused {
		t.Fatalf("unanswered past NodeTimeout: %v, want Refused", got)
	}
	r := newCmd("r", true)
	if got := s.Submit(r, late); got != Parked || r.outcome(t) != "parked" {
		t.Fatalf("a parking command while skipped: %v, want Parked", got)
	}
	if st := s.Stats(); st.Deferred != 1 || st.Written != 2 {
		t.Fatalf("stats %+v", st)
	}
	if !errors.Is(s.SkipError(), quorum.ErrUnavailable) {
		t.Errorf("SkipError: %v", s.SkipError())
	}
	s.Answer(ln, Raw{Type: ':', N: 1}, late)
	if o := b.outcome(t); o != ":" {
		t.Fatalf("b: %s", o)
	}
	if w := ln.next(t); w != "[r]" {
		t.Fatalf("wrote %s, want the parked [r]", w)
	}
	if !s.Busy() {
		t.Error("not busy with r unanswered")
	}
	s.Answer(ln, Raw{Type: ':', N: 1}, late)
	if o := r.outcome(t); o != ":" {
		t.Fatalf("r: %s", o)
	}
}

// A NOSCRIPT reply loads the scripts in front of the next batch and sends
// the command again when it says so (Command.Resend); a broken link fails
// what was unanswered on it, but parks what parks.
func TestStreamNoScriptAndBroken(t *testing.T) {
	s, ln := newTestStream(t)
	t0 := time.Now()
	a := newCmd("a", false)
	a.resend = true
	s.Submit(a, t0)
	ln.next(t)
	s.Answer(ln, Raw{Type: '-', Text: "NOSCRIPT No matching script"}, t0)
	if w := ln.next(t); w != "[load0 load1 a]" {
		t.Fatalf("wrote %s, want the loads, then a again", w)
	}
	s.Answer(ln, Raw{Type: '$', Text: "sha"}, t0)
	s.Answer(ln, Raw{Type: '$', Text: "sha"}, t0)
	s.Answer(ln, Raw{Type: '-', Text: "NOSCRIPT again"}, t0) // sent again once only
	if o := a.outcome(t); o != "-NOSCRIPT again" {
		t.Fatalf("a: %s", o)
	}
	for s.Writing() {
		time.Sleep(time.Millisecond)
	}
	b, r := newCmd("b", false), newCmd("r", true)
	s.Submit(b, t0)
	s.Submit(r, t0)
	// One batch or two, the scripts' loads in front (the last NOSCRIPT
	// asked for them too).
	for seen := ""; !strings.Contains(seen, " b") || !strings.Contains(seen, " r"); {
		seen += strings.ReplaceAll(ln.next(t), "[", " ")
	}
	s.Broken(ln, io.EOF)
	if o := b.outcome(t); o != quorum.Failed.String() {
		t.Fatalf("b on a broken link: %s", o)
	}
	if o := r.outcome(t); o != "parked" {
		t.Fatalf("r on a broken link: %s", o)
	}
}
