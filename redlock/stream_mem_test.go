package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/transport"
	"github.com/quorumlab/redlock/quorum"
)

// Deterministic tests of the stream (internal/transport) over an in-memory
// link, with the Locker's commands: the test is the master. It sees every
// write (memMaster.next), answers with s.Answer as a link's reader would,
// breaks links with s.Broken, and passes the clock to Submit and Answer, so
// nothing here sleeps or depends on timing.

// memLink is one in-memory connection: each write is handed to the test.
type memLink struct {
	m    *memMaster
	id   int
	hold chan struct{} // when set, write waits for it to be closed
}

type memWrite struct {
	ln    *memLink
	batch []*cmd
}

func (ln *memLink) Write(batch []transport.Command) error {
	cs := make([]*cmd, len(batch)) // the stream reuses batch
	for i, c := range batch {
		cs[i] = c.(*cmd)
	}
	ln.m.writes <- memWrite{ln, cs}
	if ln.hold != nil {
		<-ln.hold
	}
	return nil
}
func (ln *memLink) Direct() bool { return true }
func (ln *memLink) Close()       {}

// memMaster dials memLinks and records what is written, in order.
type memMaster struct {
	writes chan memWrite
	mu     sync.Mutex
	links  []*memLink
	fail   error // the next dials fail with it
	log    []*cmd
}

func (m *memMaster) dial() (transport.Link, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, "", m.fail
	}
	ln := &memLink{m: m, id: len(m.links)}
	m.links = append(m.links, ln)
	return ln, "", nil
}

func (m *memMaster) setFail(err error) { m.mu.Lock(); m.fail = err; m.mu.Unlock() }

func (m *memMaster) dials() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.links) }

// next returns the next write; the 10 s bound only turns a hang into a
// failure.
func (m *memMaster) next(t *testing.T) memWrite {
	t.Helper()
	select {
	case w := <-m.writes:
		m.log = append(m.log, w.batch...)
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no write")
		return memWrite{}
	}
}

// memNodeTimeout is long so that the probe (armed for parked releases, at
// MasterTimeout) never fires during a test: the tests pass the clock.
const memNodeTimeout = time.Minute

func newMem(t *testing.T) (*memMaster, *transport.Stream) {
	t.Helper()
	m := &memMaster{writes: make(chan memWrite, 2*transport.MaxDeferred)}
	cfg := &pathConfig{Addr: "mem", NodeTimeout: memNodeTimeout, Log: slog.New(slog.DiscardHandler), IDs: &identities{}, Tried: &atomic.Int32{},
		Env: wireEnv{sysEnv{}}, Proto: wireProtocol}
	s := transport.NewStream(cfg, m.dial, 0)
	t.Cleanup(func() {
		s.Close() // joins the flusher: every write is in m.writes now
		for {
			select {
			case w := <-m.writes:
				m.log = append(m.log, w.batch...)
				continue
			default:
			}
			break
		}
		checkOrder(t, m.log)
	})
	return m, s
}

// checkOrder fails when a release is written before a SET of its token.
func checkOrder(t *testing.T, log []*cmd) {
	t.Helper()
	released := map[string]int{}
	for i, c := range log {
		switch {
		case c.isRelease():
			if _, ok := released[c.token]; !ok {
				released[c.token] = i
			}
		case c.kind != cmdLoad && c.kind != cmdExtend:
			if j, ok := released[c.token]; ok {
				t.Errorf("write %d: %s of token %q after its release (write %d)", i, c.describe(), c.token, j)
			}
		}
	}
}

func round() *quorum.Round {
	r, _ := quorum.NewRound(1, 1, false, time.Now())
	return r
}

func setCmd(tok string) *cmd {
	return &cmd{kind: cmdSetNX, key: "k:" + tok, token: tok, n: 10000, round: round()}
}
func acquireCmd(tok string) *cmd {
	return &cmd{kind: cmdAcquireFenced, key: "k:" + tok, token: tok, n: 10000, round: round()}
}
func releaseCmd(tok string) *cmd {
	return &cmd{kind: cmdRelease, key: "k:" + tok, token: tok, round: round()}
}

var (
	rOK       = respReply{Type: '+', Text: "OK"}
	rDeleted  = respReply{Type: ':', N: 1}
	rNoScript = respReply{Type: '-', Text: "NOSCRIPT No matching script. Please use EVAL."}
)

// outcome is c's reply once delivered (waiting up to 10 s for the
// flusher); it ends c's round.
func outcome(c *cmd) quorum.Reply {
	return c.round.Wait(context.Background(), 10*time.Second).Replies[0]
}

func tokens(batch []*cmd) []string {
	var out []string
	for _, c := range batch {
		if c.kind == cmdLoad {
			out = append(out, "load")
			continue
		}
		out = append(out, fmt.Sprintf("%d:%s", c.kind, c.token))
	}
	return out
}

func wantBatch(t *testing.T, w memWrite, want ...*cmd) {
	t.Helper()
	if fmt.Sprint(tokens(w.batch)) != fmt.Sprint(tokens(want)) {
		t.Fatalf("link %d wrote %v, want %v", w.ln.id, tokens(w.batch), tokens(want))
	}
}

// connect makes the stream dial and answers its first command.
func connect(t *testing.T, m *memMaster, s *transport.Stream, now time.Time) *memLink {
	t.Helper()
	c := setCmd("hello")
	if got := s.Submit(c, now); got != sent {
		t.Fatalf("first submit: %v", got)
	}
	w := m.next(t)
	wantBatch(t, w, c)
	s.Answer(w.ln, rOK, now)
	waitIdle(t, s)
	return w.ln
}

// waitIdle polls until no goroutine owns the stream's write side (the
// flusher has seen its queue empty), so that the next submit is a lone
// caller's.
func waitIdle(t *testing.T, s *transport.Stream) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if !s.Writing() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the flusher did not finish")
		}
		runtime.Gosched()
	}
}

func TestMemStreamLoneCallerWritesItselfOthersBatch(t *testing.T) {
	m, s := newMem(t)
	t0 := time.Now()
	ln := connect(t, m, s, t0)

	// A lone caller on an idle stream writes before submit returns.
	c1 := setCmd("a")
	s.Submit(c1, t0)
	select {
	case w := <-m.writes:
		m.log = append(m.log, w.batch...)
		wantBatch(t, w, c1)
	default:
		t.Fatal("a lone caller's command was not written when submit returned")
	}
	s.Answer(ln, rOK, t0)

	// Commands submitted while a write is in progress go out in one batch.
	ln.hold = make(chan struct{})
	c2 := setCmd("b")
	done := make(chan struct{})
	go func() { s.Submit(c2, t0); close(done) }()
	wantBatch(t, m.next(t), c2) // written, held in write
	c3, c4, c5 := setCmd("c"), releaseCmd("a"), setCmd("d")
	for _, c := range []*cmd{c3, c4, c5} {
		if got := s.Submit(c, t0); got != sent {
			t.Fatalf("submit during a write: %v, want sent", got)
		}
	}
	close(ln.hold)
	<-done
	wantBatch(t, m.next(t), c3, c4, c5)
	for _, c := range []*cmd{c2, c3, c4, c5} {
		s.Answer(ln, map[bool]respReply{false: rOK, true: rDeleted}[c.isRelease()], t0)
		if o := outcome(c).Outcome; o != quorum.OK {
			t.Fatalf("%s: %v", c.describe(), o)
		}
	}
}

func TestMemStreamBreakerOpensAndClosesOnlyOnReplies(t *testing.T) {
	m, s := newMem(t)
	t0 := time.Now()
	ln := connect(t, m, s, t0)

	c1 := setCmd("a")
	s.Submit(c1, t0) // unanswered from t0
	wantBatch(t, m.next(t), c1)
	c2 := setCmd("b")
	if got := s.Submit(c2, t0.Add(memNodeTimeout*9/10)); got != sent {
		t.Fatalf("within MasterTimeout: %v, want sent", got)
	}
	wantBatch(t, m.next(t), c2)

	// Past MasterTimeout since c1, the oldest unanswered, though not since c2.
	late := t0.Add(memNodeTimeout * 3 / 2)
	if got := s.Submit(setCmd("c"), late); got != refused {
		t.Fatalf("unanswered past MasterTimeout: %v, want refused", got)
	}
	r := releaseCmd("x")
	if got := s.Submit(r, late); got != parked {
		t.Fatalf("release while skipped: %v, want parked", got)
	}
	// Neither time nor a reply on another link closes the breaker.
	if got := s.Submit(setCmd("d"), t0.Add(time.Hour)); got != refused {
		t.Fatalf("an hour later, still unanswered: %v, want refused", got)
	}
	s.Answer(&memLink{m: m, id: -1}, rOK, late)
	if got := s.Submit(setCmd("e"), late); got != refused {
		t.Fatalf("after a reply on another link: %v, want refused", got)
	}
	if st := s.Stats(); st.Deferred != 1 {
		t.Fatalf("Deferred %d, want 1", st.Deferred)
	}

	// A real reply closes it: the parked release goes out, after what was
	// written before, and new commands are sent.
	s.Answer(ln, rOK, late)
	if o := outcome(c1).Outcome; o != quorum.OK {
		t.Fatalf("c1: %v", o)
	}
	wantBatch(t, m.next(t), r)
	c3 := setCmd("f")
	if got := s.Submit(c3, late); got != sent {
		t.Fatalf("after a reply: %v, want sent", got)
	}
	wantBatch(t, m.next(t), c3)
}

func TestMemStreamParkedReleasesBounded(t *testing.T) {
	m, s := newMem(t)
	t0 := time.Now()
	ln := connect(t, m, s, t0)
	c1 := setCmd("a")
	s.Submit(c1, t0)
	wantBatch(t, m.next(t), c1)

	late := t0.Add(2 * memNodeTimeout)
	const extra = 10
	for i := range transport.MaxDeferred + extra {
		if got := s.Submit(releaseCmd(fmt.Sprint("r", i)), late); got != parked {
			t.Fatalf("release %d: %v, want parked", i, got)
		}
	}
	if st := s.Stats(); st.Deferred != transport.MaxDeferred || st.Dropped != extra {
		t.Fatalf("Deferred %d, Dropped %d; want %d, %d", st.Deferred, st.Dropped, transport.MaxDeferred, extra)
	}

	s.Answer(ln, rOK, late)
	var got []*cmd
	for len(got) < transport.MaxDeferred {
		got = append(got, m.next(t).batch...)
	}
	if len(got) != transport.MaxDeferred || got[0].token != fmt.Sprint("r", extra) || got[len(got)-1].token != fmt.Sprint("r", transport.MaxDeferred+extra-1) {
		t.Fatalf("wrote %d releases, %s to %s; want the newest %d, r%d to r%d", len(got), got[0].token, got[len(got)-1].token, transport.MaxDeferred, extra, transport.MaxDeferred+extra-1)
	}
	for i, c := range got {
		if c.token != fmt.Sprint("r", extra+i) {
			t.Fatalf("release %d is %s: out of order", i, c.token)
		}
	}
}

func TestMemStreamReconnect(t *testing.T) {
	m, s := newMem(t)
	t0 := time.Now()
	ln1 := connect(t, m, s, t0)

	// SET and its release in flight when the link breaks: the SET fails,
	// the release is written again on the next link, after nothing else.
	c1, r1 := setCmd("a"), releaseCmd("a")
	s.Submit(c1, t0)
	wantBatch(t, m.next(t), c1)
	s.Submit(r1, t0)
	wantBatch(t, m.next(t), r1)
	r1Round := r1.round
	s.Broken(ln1, io.EOF)
	if o := outcome(c1); o.Outcome != quorum.Failed || !errors.Is(o.Err, io.EOF) {
		t.Fatalf("SET on the broken link: %v, %v; want Failed, EOF", o.Outcome, o.Err)
	}
	w := m.next(t)
	if w.ln == ln1 {
		t.Fatal("release written again on the broken link")
	}
	wantBatch(t, w, r1)
	s.Answer(w.ln, rDeleted, t0)
	if o := r1Round.Wait(context.Background(), 0).Replies[0].Outcome; o != quorum.TimedOut { // TimedOut: nothing delivered
		t.Fatal("a release given up with its link still reported to its round")
	}

	// A failed dial: queued commands fail, releases are parked, and the
	// master is skipped for MasterTimeout; then a submit dials again and
	// the parked release goes after it.
	ln2 := w.ln
	m.setFail(errors.New("connection refused"))
	c2, r2 := setCmd("b"), releaseCmd("b")
	s.Submit(c2, t0)
	wantBatch(t, m.next(t), c2)
	s.Submit(r2, t0)
	wantBatch(t, m.next(t), r2)
	s.Broken(ln2, io.EOF) // r2 parked; the flusher dials and fails
	if o := outcome(c2).Outcome; o != quorum.Failed {
		t.Fatalf("SET on the broken link: %v", o)
	}
	c3 := setCmd("c")
	switch got := s.Submit(c3, time.Now()); got {
	case sent: // queued before the flusher's dial failed: it fails with it
		if o := outcome(c3).Outcome; o != quorum.Failed {
			t.Fatalf("SET with the dial failing: %v", o)
		}
	case refused: // the dial had failed already
	default:
		t.Fatalf("SET with the dial failing: %v", got)
	}
	if got := s.Submit(setCmd("d"), time.Now()); got != refused {
		t.Fatalf("just after a failed dial: %v, want refused", got)
	}
	m.setFail(nil)
	c4 := setCmd("e")
	if got := s.Submit(c4, time.Now().Add(2*memNodeTimeout)); got != sent {
		t.Fatalf("MasterTimeout after a failed dial: %v, want sent", got)
	}
	var got []*cmd
	for len(got) < 2 {
		w := m.next(t)
		if w.ln.id != 2 {
			t.Fatalf("wrote on link %d, want a third link", w.ln.id)
		}
		got = append(got, w.batch...)
	}
	wantBatch(t, memWrite{ln: &memLink{}, batch: got}, c4, r2)
	if n := m.dials(); n != 3 {
		t.Fatalf("%d links dialled, want 3", n)
	}
}

func TestMemStreamNoScriptReloadsAndResends(t *testing.T) {
	m, s := newMem(t)
	t0 := time.Now()
	ln := connect(t, m, s, t0)
	loads := make([]*cmd, len(scriptList))
	for i, sc := range scriptList {
		loads[i] = &cmd{kind: cmdLoad, more: &cmdMore{script: sc}}
	}
	answerLoads := func() {
		for range loads {
			s.Answer(ln, respReply{Type: '$', Text: "sha"}, t0)
		}
	}

	// NOSCRIPT: the scripts are loaded in front of the command sent again,
	// and the command's round gets the second reply.
	a := acquireCmd("a")
	s.Submit(a, t0)
	wantBatch(t, m.next(t), a)
	s.Answer(ln, rNoScript, t0)
	wantBatch(t, m.next(t), append(loads, a)...)
	answerLoads()
	s.Answer(ln, respReply{Type: '$', Text: "7"}, t0)
	if o := outcome(a); o.Outcome != quorum.OK || o.Value != 7 {
		t.Fatalf("acquire sent again: %v %d, want OK 7 (not the NOSCRIPT reply)", o.Outcome, o.Value)
	}

	// Sent again once: a second NOSCRIPT fails it.
	b := acquireCmd("b")
	s.Submit(b, t0)
	wantBatch(t, m.next(t), b)
	s.Answer(ln, rNoScript, t0)
	wantBatch(t, m.next(t), append(loads, b)...)
	answerLoads()
	s.Answer(ln, rNoScript, t0)
	if o := outcome(b).Outcome; o != quorum.Failed {
		t.Fatalf("second NOSCRIPT: %v, want Failed", o)
	}

	// An acquisition with its own release behind it is not sent again
	// (it would run after the release); the release is.
	c, rc := acquireCmd("c"), releaseCmd("c")
	s.Submit(c, t0)
	wantBatch(t, m.next(t), append(loads, c)...) // b's NOSCRIPT asked for a load
	answerLoads()
	s.Submit(rc, t0)
	wantBatch(t, m.next(t), rc)
	s.Answer(ln, rNoScript, t0)
	if o := outcome(c).Outcome; o != quorum.Failed {
		t.Fatalf("acquire with its release behind: %v, want Failed", o)
	}
	s.Answer(ln, rNoScript, t0)
	wantBatch(t, m.next(t), append(loads, rc)...)
	answerLoads()
	s.Answer(ln, rDeleted, t0)
	if o := outcome(rc).Outcome; o != quorum.OK {
		t.Fatalf("release sent again: %v", o)
	}
	// newMem's cleanup checks that "c" was not written after its release.

	// A join with its waiter's leave behind it is not sent again either
	// (its member would stay in the queue); the leave goes as it is.
	j := &cmd{kind: cmdJoin, key: "k:w", token: "w1 1000 grant", n: 1, pass: 1000, round: round()}
	lv := &cmd{kind: cmdLeave, key: "k:w", token: "w1", round: round()}
	s.Submit(j, t0)
	wantBatch(t, m.next(t), j)
	s.Submit(lv, t0)
	wantBatch(t, m.next(t), lv)
	s.Answer(ln, rNoScript, t0)
	if o := outcome(j).Outcome; o != quorum.Failed {
		t.Fatalf("join with its leave behind: %v, want Failed", o)
	}
	s.Answer(ln, respReply{Type: ':', N: 1}, t0)
	if o := outcome(lv).Outcome; o != quorum.OK {
		t.Fatalf("leave: %v", o)
	}
	// The next batch: the scripts' loads (j's NOSCRIPT asked for them)
	// and the next command, not j again.
	d := acquireCmd("d")
	s.Submit(d, t0)
	wantBatch(t, m.next(t), append(loads, d)...)
	answerLoads()
	s.Answer(ln, rOK, t0)

	// Nor a join with the release of its member's handed lock behind it
	// (Unlock removes the member first, §14.3 item 6): run after it, the
	// join would put back a member whose waiter has gone, which the next
	// release finding the key absent hands the key to (the simulator's
	// swarm, seed 50003599 at d5d6e8a). The release is sent again.
	j2 := &cmd{kind: cmdJoin, key: "k:w", token: "w2 1000 g2", n: 1, pass: 1000, round: round()}
	rel := &cmd{kind: cmdRelease, key: "k:w", token: "g2", pop: releaseHand, pass: 1000, round: round(), more: &cmdMore{waiter: "w2 1000 g2"}}
	s.Submit(j2, t0)
	wantBatch(t, m.next(t), j2)
	s.Submit(rel, t0)
	wantBatch(t, m.next(t), rel)
	s.Answer(ln, rNoScript, t0)
	if o := outcome(j2).Outcome; o != quorum.Failed {
		t.Fatalf("join with the release of its member behind: %v, want Failed", o)
	}
	s.Answer(ln, rNoScript, t0)
	wantBatch(t, m.next(t), append(loads, rel)...)
	answerLoads()
	s.Answer(ln, rDeleted, t0)
	if o := outcome(rel).Outcome; o != quorum.OK {
		t.Fatalf("release sent again: %v", o)
	}
}
