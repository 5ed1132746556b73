package transport

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A Stream is the Locker's one ordered path to one master, and the one
// owner of what the Locker knows about that master.
//
//   - Order: commands are written in the order they were submitted, on one
//     connection, so a release can never overtake the SET it cleans up.
//   - Batching: commands submitted while a write is in progress go out
//     together in the next write (one syscall for many callers). A caller
//     that finds the stream idle, its round the Locker's only one in
//     flight (Config.Rounds), writes its own command at once: a lone
//     caller never waits for a batch.
//   - Not answering: a master that has had a command unanswered and sent
//     no reply for longer than MasterTimeout is skipped: new acquire and
//     extend commands fail at once as Unavailable, and nothing is written
//     to it. It counts as answering again only when a reply arrives from
//     it; nothing else closes the breaker.
//   - Deferred releases: a release (or a waiter's leave of the queue,
//     Command.Parks) submitted while the master is skipped,
//     or whose outcome was lost with a broken connection, is parked and
//     written when the master answers again (after everything written
//     before it). At most MaxDeferred are parked; past that the oldest are
//     dropped (their keys expire with their TTL) and counted.
type Stream struct {
	cfg *Config
	// dial opens the link to the master and reports the server's run_id
	// ("" when it cannot tell).
	dial func() (Link, string, error)
	// giveUpAfter, when positive, is how long the master may stay silent
	// with commands unanswered before the connection is closed and opened
	// again (the client's ReadTimeout): a connection whose data is lost
	// (a black hole) would otherwise never answer.
	giveUpAfter time.Duration

	mu       sync.Mutex
	queue    []Command // submitted, not yet written
	spare    []Command // the writer's other buffer
	inflight []Command // written, unanswered, in order (from head)
	head     int
	parked   []Command // releases held back while the master is not answering
	dropped  uint64    // parked releases dropped for room
	written  uint64    // commands written, for tests and stats
	writing  bool      // a goroutine owns the link's write side
	link     Link      // nil until connected, and after it broke
	progress time.Time
	failedAt time.Time // last failed dial
	needLoad bool      // a NOSCRIPT reply: load the scripts before the next batch
	probing  Stopper   // armed while a release is parked or unanswered: see probe
	// stale is a fast-path connection that ended with commands written
	// and unanswered: the next connection ends it on the server first
	// (respLink.kill), so that none of them runs after what follows.
	stale   *respLink
	noKill  sync.Once // warned that CLIENT KILL is refused
	invalid error     // the master is another master's duplicate
	tried   bool      // the first dial has ended (either way)
	closed  bool
	// shard: one shard of a Redis Cluster master (cluster.go), whose
	// shardSet counts the master as tried; onRedirect, when set, is told
	// of MOVED and ASK replies.
	shard      bool
	onRedirect func()

	wake chan struct{} // capacity 1: the flusher has work
	quit chan struct{}
	// ctx ends at close: it cuts short a dial in progress.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// A Link is one connection (or, on the plain and client paths, a client)
// to a master. Its replies go to its stream's Answer, in order; a broken
// connection to Broken.
type Link interface {
	// Write sends batch in order. A direct link returns once it is
	// written and its reader answers the commands; an indirect one returns
	// once it has answered them. An error means the link is broken.
	Write(batch []Command) error
	// Direct reports whether a caller may write on it itself (the write
	// does not wait for replies).
	Direct() bool
	// Close ends the link without waiting; the stream's WaitGroup joins
	// the link's reader.
	Close()
}

// MaxDeferred bounds the releases parked per master.
const MaxDeferred = 4096

// Submitted is what became of a submitted command.
type Submitted uint8

const (
	Sent    Submitted = iota // queued: its reply will come to its round
	Parked                   // a release held back until the master answers
	Refused                  // not sent: the master is not answering, or closed
)

// NewStream is the stream to cfg's master over the links dial opens; dial
// reports the server's run_id ("" when it cannot tell). giveUpAfter is as
// Stream's field.
func NewStream(cfg *Config, dial func() (Link, string, error), giveUpAfter time.Duration) *Stream {
	s := &Stream{cfg: cfg, dial: dial, giveUpAfter: giveUpAfter, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if !cfg.Env.Detached() {
		s.wg.Go(s.run)
	}
	return s
}

// unansweredLocked counts commands queued or written and not answered.
func (s *Stream) unansweredLocked() int { return len(s.queue) + len(s.inflight) - s.head }

// skippingLocked reports whether the master is not answering: a command
// has waited, and no reply came, for longer than MasterTimeout; or the last
// dial failed less than MasterTimeout ago.
func (s *Stream) skippingLocked(now time.Time) bool {
	nt := s.cfg.NodeTimeout
	if s.link == nil && !s.failedAt.IsZero() && now.Sub(s.failedAt) < nt {
		return true
	}
	return s.unansweredLocked() > 0 && now.Sub(s.progress) > nt
}

// Submit queues c, writing it at once when the stream is idle. now is
// the caller's reading of the clock (its round's start).
func (s *Stream) Submit(c Command, now time.Time) Submitted {
	s.mu.Lock()
	if s.closed || s.invalid != nil {
		s.mu.Unlock()
		return Refused
	}
	if s.skippingLocked(now) {
		if ln := s.link; ln != nil && s.giveUpAfter > 0 && now.Sub(s.progress) > s.giveUpAfter {
			ln.Close() // its reader fails and calls broken; the next submit dials
		}
		if c.Parks() {
			s.parkLocked(c)
			s.mu.Unlock()
			return Parked
		}
		s.mu.Unlock()
		return Refused
	}
	idle := s.unansweredLocked() == 0
	if idle {
		s.progress = now
	}
	s.queue = append(s.queue, c)
	if c.Parks() && s.probing == nil {
		s.armProbeLocked() // it must not wait for other traffic (probe)
	}
	if s.writing {
		s.mu.Unlock()
		return Sent
	}
	s.writing = true
	ln := s.link
	// Only a lone caller writes itself: it finds nothing in flight on the
	// stream, and its round is the Locker's only one (a lone caller must
	// not wait for a handoff). Otherwise the flusher writes, and what
	// callers queue meanwhile, the other rounds' commands among them, goes
	// out in one batch.
	if ln == nil || !ln.Direct() || !idle || !s.lone() {
		s.mu.Unlock()
		s.kick()
		return Sent
	}
	batch := s.takeLocked()
	s.mu.Unlock()
	s.write(ln, batch)
	s.mu.Lock()
	s.spare = batch[:0]
	more := len(s.queue) > 0 && !s.closed
	if !more {
		s.writing = false
	}
	s.mu.Unlock()
	if more {
		s.kick() // the flusher goes on; this caller has its own round to wait for
	}
	return Sent
}

// lone reports whether the caller's round is the Locker's only one in
// flight (Config.Rounds).
func (s *Stream) lone() bool { return s.cfg.Rounds == nil || s.cfg.Rounds.Load() <= 1 }

// parkLocked holds release c back until the master answers; its round no
// longer waits for it.
func (s *Stream) parkLocked(c Command) {
	c.Park()
	s.parked = append(s.parked, c)
	s.trimParkedLocked()
	s.armProbeLocked()
}

// probeDueLocked reports whether the probe still has something to do:
// releases parked, or commands unanswered (among them, possibly, a
// release written on a connection that went silent).
func (s *Stream) probeDueLocked() bool { return len(s.parked) > 0 || s.unansweredLocked() > 0 }

// armProbeLocked makes sure the stream looks at its master again while a
// release is parked or unanswered, whether or not anything else is
// submitted to it: every MasterTimeout, but not more than once a second (a
// master down for good is dialled once a second).
func (s *Stream) armProbeLocked() {
	if s.probing == nil && !s.closed {
		s.probing = s.cfg.Env.AfterFunc(max(s.cfg.NodeTimeout, ProbeEvery), s.probe)
	}
}

// ProbeEvery is the shortest interval between probes of a master.
const ProbeEvery = time.Second

// probe delivers releases with no traffic to wait for: without a link it
// dials (parked releases go out once the master answers); with a link
// silent for longer than giveUpAfter it closes it, as the next submit
// would, so that a lost connection is opened again and what was
// unanswered on it (releases included) is parked and sent again.
func (s *Stream) probe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = nil
	if s.closed || !s.probeDueLocked() {
		return
	}
	switch ln := s.link; {
	case ln == nil && !s.writing && len(s.parked) > 0:
		s.writing = true
		s.kick()
		return // a failed dial arms the probe again
	case ln != nil && s.giveUpAfter > 0 && s.unansweredLocked() > 0 && s.cfg.Env.Now().Sub(s.progress) > s.giveUpAfter:
		ln.Close() // its reader calls broken, which dials again
		return
	}
	s.armProbeLocked()
}

// trimParkedLocked drops the oldest parked releases beyond MaxDeferred.
func (s *Stream) trimParkedLocked() {
	for len(s.parked) > MaxDeferred {
		s.parked[0] = nil
		s.parked = s.parked[1:]
		s.dropped++
	}
}

// takeLocked moves the queue to inflight and returns it as the batch to
// write, with the scripts' loads in front when a NOSCRIPT asked for them.
func (s *Stream) takeLocked() []Command {
	batch := s.queue
	s.queue = s.spare[:0]
	s.spare = nil
	if s.needLoad {
		s.needLoad = false
		p := s.cfg.Proto
		loads := make([]Command, 0, len(p.Scripts)+len(batch))
		for i := range p.Scripts {
			loads = append(loads, p.Load(i))
		}
		batch = append(loads, batch...)
	}
	s.inflight = append(s.inflight, batch...)
	s.written += uint64(len(batch))
	return batch
}

func (s *Stream) kick() {
	if s.cfg.Env.Detached() {
		s.cfg.Env.Later(s.flush)
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Stream) write(ln Link, batch []Command) {
	if err := ln.Write(batch); err != nil {
		s.Broken(ln, err)
	}
}

// run is the flusher: it connects when needed and writes what callers left
// queued while another write was in progress.
func (s *Stream) run() {
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		// Let the callers that are runnable now queue their commands
		// too: one write for all of them.
		runtime.Gosched()
		s.flush()
	}
}

func (s *Stream) flush() {
	for {
		s.mu.Lock()
		// Without a link, parked releases are work too: dialling is how
		// they reach the master.
		if s.closed || len(s.queue) == 0 && (s.link != nil || len(s.parked) == 0) {
			s.writing = false
			s.mu.Unlock()
			return
		}
		ln := s.link // the flusher owns the write side (writing) here
		if ln == nil {
			s.mu.Unlock()
			var runID string
			var err error
			ln, runID, err = s.dial()
			if err == nil {
				if err = s.cfg.IDs.Claim(s.cfg.Master, runID, false); err != nil {
					ln.Close()
				}
			}
			s.mu.Lock()
			if !s.tried {
				s.tried = true
				if !s.shard {
					s.cfg.Tried.Add(1)
				}
			}
			if err == nil && s.closed {
				s.mu.Unlock()
				ln.Close()
				return
			}
			if err != nil {
				s.failedAt = s.cfg.Env.Now()
				if s.cfg.Proto.Invalid(err) {
					s.invalid = err
				}
				failed := s.queue
				s.queue = nil
				s.writing = false
				for _, c := range failed {
					if c.Parks() && s.invalid == nil {
						s.parkLocked(c)
					}
				}
				if s.invalid != nil {
					s.parked = nil
				}
				if len(s.parked) > 0 {
					s.armProbeLocked()
				}
				s.mu.Unlock()
				rep := quorum.Reply{Outcome: quorum.Failed, Err: err}
				now := s.cfg.Env.Now()
				for _, c := range failed {
					c.Done(rep, now)
				}
				return
			}
			s.link, s.failedAt, s.stale = ln, time.Time{}, nil
			s.answeredLocked(s.cfg.Env.Now())
		}
		batch := s.takeLocked()
		s.mu.Unlock()
		s.write(ln, batch)
		s.mu.Lock()
		s.spare = batch[:0]
		s.mu.Unlock()
	}
}

// answeredLocked records that the master answered: it is no longer
// skipped, and what was parked goes out after everything submitted before.
func (s *Stream) answeredLocked(now time.Time) {
	s.progress = now
	if len(s.parked) > 0 {
		s.queue = append(s.queue, s.parked...)
		clear(s.parked)
		s.parked = s.parked[:0]
		if !s.writing {
			s.writing = true
			s.kick()
		}
	}
}

// Answer hands the reply r from link ln, read at now, to the oldest
// unanswered command.
func (s *Stream) Answer(ln Link, r Raw, now time.Time) {
	s.mu.Lock()
	if s.link != ln || s.head == len(s.inflight) {
		s.mu.Unlock()
		return
	}
	c := s.inflight[s.head]
	s.inflight[s.head] = nil
	s.head++
	if s.head == len(s.inflight) {
		s.inflight, s.head = s.inflight[:0], 0
	}
	if r.noScript() {
		s.needLoad = true
		if s.resendLocked(c) {
			s.answeredLocked(now)
			s.mu.Unlock()
			return
		}
	}
	if s.onRedirect != nil && r.redirect() {
		s.onRedirect()
	}
	s.answeredLocked(now)
	s.mu.Unlock()
	c.Answer(r, now)
}

// resendLocked queues c again after a NOSCRIPT reply, which means it did
// not run, when c says so (Command.Resend: which commands may run late,
// after what is ahead of them on the stream); the scripts are loaded in
// front of the next batch (needLoad).
func (s *Stream) resendLocked(c Command) bool {
	if !c.Resend(s.aheadLocked) {
		return false
	}
	s.queue = append(s.queue, c)
	if !s.writing {
		s.writing = true
		s.kick()
	}
	return true
}

// aheadLocked reports whether a command matching is queued, in flight or
// parked.
func (s *Stream) aheadLocked(matching func(Command) bool) bool {
	for _, q := range [][]Command{s.queue, s.inflight[s.head:], s.parked} {
		if slices.ContainsFunc(q, matching) {
			return true
		}
	}
	return false
}

// Broken ends link ln after an I/O error: its unanswered commands fail,
// except releases, whose outcome is unknown: they are parked and sent
// again once the master answers.
func (s *Stream) Broken(ln Link, err error) {
	s.mu.Lock()
	if s.link != ln {
		s.mu.Unlock()
		return
	}
	s.link = nil
	lost := append([]Command(nil), s.inflight[s.head:]...)
	if k, ok := ln.(*respLink); ok && len(lost) > 0 {
		s.stale = k
	}
	clear(s.inflight)
	s.inflight, s.head = s.inflight[:0], 0
	// They were submitted before anything parked now: they go first.
	var again []Command
	for _, c := range lost {
		if c.Parks() {
			c.Park()
			again = append(again, c)
		}
	}
	s.parked = append(again, s.parked...)
	s.trimParkedLocked()
	if (len(s.queue) > 0 || len(s.parked) > 0) && !s.writing {
		s.writing = true
		s.kick()
	}
	s.mu.Unlock()
	ln.Close()
	rep := quorum.Reply{Outcome: quorum.Failed, Err: err}
	now := s.cfg.Env.Now()
	for _, c := range lost {
		if !c.Parks() {
			c.Done(rep, now)
		}
	}
}

// staleLink returns the connection a new one must end on the server
// first, or nil; a successful dial forgets it.
func (s *Stream) staleLink() *respLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}

// Close stops the stream: nothing more is written, parked releases are
// dropped, unanswered commands are abandoned, and its goroutines (the
// flusher, the link's reader) are joined.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	ln := s.link
	s.link = nil
	s.parked = nil
	if s.probing != nil {
		s.probing.Stop()
		s.probing = nil
	}
	s.mu.Unlock()
	close(s.quit)
	s.cancel()
	if ln != nil {
		ln.Close()
	}
	s.wg.Wait()
	// A link the flusher was still dialling is closed by the flusher.
}

// Stats is what the stream knows about its master.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Addr: s.cfg.Addr, Skipped: s.skippingLocked(s.cfg.Env.Now()), Deferred: len(s.parked), Dropped: s.dropped, Written: s.written}
}

// SkipError is the error of a master whose stream refuses commands: the
// misconfiguration that made it stop (a permission refused at set-up, a
// duplicate master: Protocol.Invalid), or quorum.ErrUnavailable while it
// is not answering.
func (s *Stream) SkipError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.invalid != nil {
		return s.invalid
	}
	return quorum.ErrUnavailable
}

// Busy reports whether the stream has commands queued, unanswered or
// parked.
func (s *Stream) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unansweredLocked() > 0 || len(s.parked) > 0
}

// Writing reports whether a goroutine owns the link's write side (a
// caller writing its own command, or the flusher before it has seen its
// queue empty).
func (s *Stream) Writing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writing
}
