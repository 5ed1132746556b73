package redlock

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A stream is the Locker's one ordered path to one master, and the one
// owner of what the Locker knows about that master.
//
//   - Order: commands are written in the order they were submitted, on one
//     connection, so a release can never overtake the SET it cleans up.
//   - Batching: commands submitted while a write is in progress go out
//     together in the next write (one syscall for many callers). A caller
//     that finds the stream idle writes its own command at once: a lone
//     caller never waits for a batch.
//   - Not answering: a master that has had a command unanswered and sent
//     no reply for longer than MasterTimeout is skipped: new acquire and
//     extend commands fail at once as Unavailable, and nothing is written
//     to it. It counts as answering again only when a reply arrives from
//     it; nothing else closes the breaker.
//   - Deferred releases: a release (or a waiter's leave of the queue,
//     cmd.parks) submitted while the master is skipped,
//     or whose outcome was lost with a broken connection, is parked and
//     written when the master answers again (after everything written
//     before it). At most maxDeferred are parked; past that the oldest are
//     dropped (their keys expire with their TTL) and counted.
type stream struct {
	cfg *pathConfig
	// dial opens the link to the master and reports the server's run_id
	// ("" when it cannot tell).
	dial func() (link, string, error)
	// giveUpAfter, when positive, is how long the master may stay silent
	// with commands unanswered before the connection is closed and opened
	// again (the client's ReadTimeout): a connection whose data is lost
	// (a black hole) would otherwise never answer.
	giveUpAfter time.Duration

	mu       sync.Mutex
	queue    []*cmd // submitted, not yet written
	spare    []*cmd // the writer's other buffer
	inflight []*cmd // written, unanswered, in order (from head)
	head     int
	parked   []*cmd // releases held back while the master is not answering
	dropped  uint64 // parked releases dropped for room
	written  uint64 // commands written, for tests and stats
	writing  bool   // a goroutine owns the link's write side
	link     link   // nil until connected, and after it broke
	progress time.Time
	failedAt time.Time // last failed dial
	needLoad bool      // a NOSCRIPT reply: load the scripts before the next batch
	probing  stopper   // armed while a release is parked or unanswered: see probe
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

// A link is one connection (or, on the plain path, a client) to a master.
type link interface {
	// write sends batch in order. A direct link returns once it is
	// written and its reader answers the commands; an indirect one returns
	// once it has answered them. An error means the link is broken.
	write(batch []*cmd) error
	// direct reports whether a caller may write on it itself (the write
	// does not wait for replies).
	direct() bool
	// close ends the link without waiting; the stream's WaitGroup joins
	// the link's reader.
	close()
}

// maxDeferred bounds the releases parked per master.
const maxDeferred = 4096

// submitted is what became of a submitted command.
type submitted uint8

const (
	sent    submitted = iota // queued: its reply will come to its round
	parked                   // a release held back until the master answers
	refused                  // not sent: the master is not answering, or closed
)

func newStream(cfg *pathConfig, dial func() (link, string, error), giveUpAfter time.Duration) *stream {
	s := &stream{cfg: cfg, dial: dial, giveUpAfter: giveUpAfter, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if !cfg.env.detached() {
		s.wg.Go(s.run)
	}
	return s
}

// unansweredLocked counts commands queued or written and not answered.
func (s *stream) unansweredLocked() int { return len(s.queue) + len(s.inflight) - s.head }

// skippingLocked reports whether the master is not answering: a command
// has waited, and no reply came, for longer than MasterTimeout; or the last
// dial failed less than MasterTimeout ago.
func (s *stream) skippingLocked(now time.Time) bool {
	nt := s.cfg.nodeTimeout
	if s.link == nil && !s.failedAt.IsZero() && now.Sub(s.failedAt) < nt {
		return true
	}
	return s.unansweredLocked() > 0 && now.Sub(s.progress) > nt
}

// submit queues c, writing it at once when the stream is idle. now is
// the caller's reading of the clock (its round's start).
func (s *stream) submit(c *cmd, now time.Time) submitted {
	s.mu.Lock()
	if s.closed || s.invalid != nil {
		s.mu.Unlock()
		return refused
	}
	if s.skippingLocked(now) {
		if ln := s.link; ln != nil && s.giveUpAfter > 0 && now.Sub(s.progress) > s.giveUpAfter {
			ln.close() // its reader fails and calls broken; the next submit dials
		}
		if c.parks() {
			s.parkLocked(c)
			s.mu.Unlock()
			return parked
		}
		s.mu.Unlock()
		return refused
	}
	idle := s.unansweredLocked() == 0
	if idle {
		s.progress = now
	}
	s.queue = append(s.queue, c)
	if c.parks() && s.probing == nil {
		s.armProbeLocked() // it must not wait for other traffic (probe)
	}
	if s.writing {
		s.mu.Unlock()
		return sent
	}
	s.writing = true
	ln := s.link
	// Only a caller that finds nothing in flight writes itself (a lone
	// caller must not wait for a handoff); under load the flusher writes,
	// and what callers queue meanwhile goes out in one batch.
	if ln == nil || !ln.direct() || !idle {
		s.mu.Unlock()
		s.kick()
		return sent
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
	return sent
}

// parkLocked holds release c back until the master answers; its round no
// longer waits for it.
func (s *stream) parkLocked(c *cmd) {
	c.round = nil
	s.parked = append(s.parked, c)
	s.trimParkedLocked()
	s.armProbeLocked()
}

// probeDueLocked reports whether the probe still has something to do:
// releases parked, or commands unanswered (among them, possibly, a
// release written on a connection that went silent).
func (s *stream) probeDueLocked() bool { return len(s.parked) > 0 || s.unansweredLocked() > 0 }

// armProbeLocked makes sure the stream looks at its master again while a
// release is parked or unanswered, whether or not anything else is
// submitted to it: every MasterTimeout, but not more than once a second (a
// master down for good is dialled once a second).
func (s *stream) armProbeLocked() {
	if s.probing == nil && !s.closed {
		s.probing = s.cfg.env.afterFunc(max(s.cfg.nodeTimeout, probeEvery), s.probe)
	}
}

// probeEvery is the shortest interval between probes of a master.
const probeEvery = time.Second

// probe delivers releases with no traffic to wait for: without a link it
// dials (parked releases go out once the master answers); with a link
// silent for longer than giveUpAfter it closes it, as the next submit
// would, so that a lost connection is opened again and what was
// unanswered on it (releases included) is parked and sent again.
func (s *stream) probe() {
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
	case ln != nil && s.giveUpAfter > 0 && s.unansweredLocked() > 0 && s.cfg.env.now().Sub(s.progress) > s.giveUpAfter:
		ln.close() // its reader calls broken, which dials again
		return
	}
	s.armProbeLocked()
}

// trimParkedLocked drops the oldest parked releases beyond maxDeferred.
func (s *stream) trimParkedLocked() {
	for len(s.parked) > maxDeferred {
		s.parked[0] = nil
		s.parked = s.parked[1:]
		s.dropped++
	}
}

// takeLocked moves the queue to inflight and returns it as the batch to
// write, with the scripts' loads in front when a NOSCRIPT asked for them.
func (s *stream) takeLocked() []*cmd {
	batch := s.queue
	s.queue = s.spare[:0]
	s.spare = nil
	if s.needLoad {
		s.needLoad = false
		loads := make([]*cmd, 0, len(scriptList)+len(batch))
		for _, sc := range scriptList {
			loads = append(loads, &cmd{kind: cmdLoad, script: sc})
		}
		batch = append(loads, batch...)
	}
	s.inflight = append(s.inflight, batch...)
	s.written += uint64(len(batch))
	return batch
}

func (s *stream) kick() {
	if s.cfg.env.detached() {
		s.cfg.env.later(s.flush)
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *stream) write(ln link, batch []*cmd) {
	if err := ln.write(batch); err != nil {
		s.broken(ln, err)
	}
}

// run is the flusher: it connects when needed and writes what callers left
// queued while another write was in progress.
func (s *stream) run() {
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

func (s *stream) flush() {
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
				if err = s.cfg.ids.claim(s.cfg.master, identity{id: runID}); err != nil {
					ln.close()
				}
			}
			s.mu.Lock()
			if !s.tried {
				s.tried = true
				if !s.shard {
					s.cfg.tried.Add(1)
				}
			}
			if err == nil && s.closed {
				s.mu.Unlock()
				ln.close()
				return
			}
			if err != nil {
				s.failedAt = s.cfg.env.now()
				var inv *invalidError
				if errors.As(err, &inv) {
					s.invalid = err
				}
				failed := s.queue
				s.queue = nil
				s.writing = false
				for _, c := range failed {
					if c.parks() && s.invalid == nil {
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
				now := s.cfg.env.now()
				for _, c := range failed {
					c.done(rep, now)
				}
				return
			}
			s.link, s.failedAt, s.stale = ln, time.Time{}, nil
			s.answeredLocked(s.cfg.env.now())
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
func (s *stream) answeredLocked(now time.Time) {
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

// answer hands the reply r from link ln, read at now, to the oldest
// unanswered command.
func (s *stream) answer(ln link, r raw, now time.Time) {
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
	c.done(c.interpret(r), now)
}

// resendLocked queues c again after a NOSCRIPT reply, which means it did
// not run; the scripts are loaded in front of the next batch (needLoad).
// Releases and extensions may run late at any time (compare-and-delete,
// compare-and-expire on a token no one else has). An acquisition may not
// run after a release of its own token, so it is sent again only if no
// such release is queued, in flight or parked ahead of it; nor may a
// waiter's join run after its leave, or after the release that removes
// its member (its member would stay in the queue, named or handed the key
// by the next releases, until the queue expires). Each command is
// sent again once: a master that keeps answering NOSCRIPT fails it.
func (s *stream) resendLocked(c *cmd) bool {
	if c.resent || c.lua() == nil {
		return false
	}
	if c.kind == cmdJoin && s.leaveAheadLocked(c.key, c.token) {
		return false
	}
	if !c.isRelease() && c.kind != cmdExtend && c.kind != cmdExtendMulti && c.kind != cmdExtendBatch && s.releaseAheadLocked(c.token) {
		return false
	}
	c.resent = true
	s.queue = append(s.queue, c)
	if !s.writing {
		s.writing = true
		s.kick()
	}
	return true
}

// leaveAheadLocked reports whether a command that takes member off key's
// queue is queued, in flight or parked: a leave of its waiter's id (the
// member's first field), or a release that removes this very member
// first (Unlock of a handed lock, §14.3 item 6; a give-back's release
// removes a member that its waiter's later join, with its bare id, does
// not bring back).
func (s *stream) leaveAheadLocked(key, member string) bool {
	id, _, _ := strings.Cut(member, " ")
	return s.aheadLocked(func(c *cmd) bool {
		if c.key != key {
			return false
		}
		if c.isRelease() {
			return c.waiter != "" && c.waiter == member
		}
		other, _, _ := strings.Cut(c.token, " ")
		return c.kind == cmdLeave && other == id
	})
}

// releaseAheadLocked reports whether a release of token is queued, in
// flight or parked.
func (s *stream) releaseAheadLocked(token string) bool {
	return s.aheadLocked(func(c *cmd) bool { return c.isRelease() && c.token == token })
}

// aheadLocked reports whether a command matching is queued, in flight or
// parked.
func (s *stream) aheadLocked(matching func(*cmd) bool) bool {
	for _, q := range [][]*cmd{s.queue, s.inflight[s.head:], s.parked} {
		if slices.ContainsFunc(q, matching) {
			return true
		}
	}
	return false
}

// broken ends link ln after an I/O error: its unanswered commands fail,
// except releases, whose outcome is unknown: they are parked and sent
// again once the master answers.
func (s *stream) broken(ln link, err error) {
	s.mu.Lock()
	if s.link != ln {
		s.mu.Unlock()
		return
	}
	s.link = nil
	lost := append([]*cmd(nil), s.inflight[s.head:]...)
	if k, ok := ln.(*respLink); ok && len(lost) > 0 {
		s.stale = k
	}
	clear(s.inflight)
	s.inflight, s.head = s.inflight[:0], 0
	// They were submitted before anything parked now: they go first.
	var again []*cmd
	for _, c := range lost {
		if c.parks() {
			c.round = nil
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
	ln.close()
	rep := quorum.Reply{Outcome: quorum.Failed, Err: err}
	now := s.cfg.env.now()
	for _, c := range lost {
		if !c.parks() {
			c.done(rep, now)
		}
	}
}

// staleLink returns the connection a new one must end on the server
// first, or nil; a successful dial forgets it.
func (s *stream) staleLink() *respLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}

// close stops the stream: nothing more is written, parked releases are
// dropped, unanswered commands are abandoned, and its goroutines (the
// flusher, the link's reader) are joined.
func (s *stream) close() {
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
		ln.close()
	}
	s.wg.Wait()
	// A link the flusher was still dialling is closed by the flusher.
}

// MasterStats is what the Locker knows about one master.
type MasterStats struct {
	// Addr is the master's address as its client reports it.
	Addr string
	// Skipped: the master is not answering, and new commands are not
	// sent to it.
	Skipped bool
	// Deferred is how many releases wait for the master to answer again;
	// Dropped how many were given up for room (their keys expire with
	// their TTL).
	Deferred int
	Dropped  uint64
	// Written counts the commands written to the master.
	Written uint64
	// RoundP50 and RoundP99 are the median and 99th percentile of the
	// master's answer times in the Locker's last 128 rounds it answered
	// (from each round's start; 0 before any answer).
	RoundP50, RoundP99 time.Duration
	// Shards has one entry per shard master node when the master is a
	// Redis Cluster on the fast path (Addr: the node's address), nil
	// otherwise. The fields above are then their sums, and Skipped is
	// set while any shard is skipped.
	Shards []MasterStats
}

func (s *stream) stats() MasterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return MasterStats{Addr: s.cfg.addr, Skipped: s.skippingLocked(s.cfg.env.now()), Deferred: len(s.parked), Dropped: s.dropped, Written: s.written}
}
