package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// publishAttempts is how many rounds Campaign makes at most to publish
// the leader's value before it gives the lock back; it waits a
// MasterTimeout between them, and stops once the lock has two
// MasterTimeouts or less left.
const publishAttempts = 3

// maxValueLen is the longest value a leader may publish, in bytes.
const maxValueLen = 64 << 10

// Election is one campaigner in the election called name (Locker.Election):
// the campaigner that holds the election's lock leads, and its term is the
// lock's fence. Its methods are safe for concurrent use; one Election
// leads at most once at a time (Campaign, then Resign or loss).
//
// What each side may conclude is in docs/design.md §21: the leader's
// *Lock (Done, Deadline, Fence) is the only guarantee; what Leader and
// Observe report to others is a hint, and a resource that must not take
// a stale leader's write checks the term (WriteFenced).
type Election struct {
	l    *Locker
	name string
	t    target

	mu   sync.Mutex
	lead *Lock // the leadership this Election holds, nil when none
}

// Leader is an election's leader as a majority of masters report it.
type Leader struct {
	// Value is what the leader published (Campaign, Proclaim).
	Value string
	// Term is the leader's lock's fence: larger than every earlier
	// leader's.
	Term uint64
	// Deadline is when, by the reader's clock, the leader's keys expire
	// on a majority of masters unless it extends them: after it, another
	// campaigner may lead.
	Deadline time.Time
}

// Election returns a campaigner in the election called name. The name
// follows the rules of a resource name; an election's keys are its own
// (a mutex, semaphore or read-write lock of the same name is another
// lock). Terms are fences, so the Locker needs Options.Fencing; a Locker
// with Options.RedsyncKeys refuses it (ErrInvalid), as it does semaphores.
func (l *Locker) Election(name string) (*Election, error) {
	if !l.opts.Fencing {
		return nil, invalid("an election's term is its lock's fence: open the Locker with Options.Fencing")
	}
	stem, err := l.primitiveKey(name)
	if err != nil {
		return nil, err
	}
	return &Election{l: l, name: name, t: target{resource: name, key: stem + electionInfix}}, nil
}

// electionInfix follows the election's key stem in its lock key.
const electionInfix = ":e"

// Campaign waits until this campaigner leads (as Locker.Lock waits, woken
// by the leader's release or expiry; ctx bounds the wait), publishes value
// on a majority of masters, and returns the leadership: a *Lock already
// kept (Keep), whose Fence is the term and whose Done closes when
// leadership ends, no later than its Deadline. Hand its Context to the
// leader's work. WithTTL sets the lock's TTL, and with it how soon others
// take over from a leader that dies.
//
// A Campaign while this Election leads fails with ErrInvalid. If three
// rounds cannot publish the value before the lock's deadline, Campaign
// releases the lock (handing it on to the longest-waiting campaigner) and
// campaigns again, under a new term, while ctx allows. When ctx ends it
// fails with an error wrapping ErrNotAcquired (it was waiting) or ErrLost
// (it was publishing), or both once it has given a lock back; when the
// Locker's Close or Shutdown ends it, with ErrClosed.
func (e *Election) Campaign(ctx context.Context, value string, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("Campaign")
	}
	return e.campaign(ctx, value, true, opts)
}

// campaign is Campaign; keep false leaves the leadership unkept, as the
// simulator's election rows campaign (the keeper runs in its kept rows).
func (e *Election) campaign(ctx context.Context, value string, keep bool, opts []LockOption) (*Lock, error) {
	if len(value) > maxValueLen {
		return nil, invalid(fmt.Sprintf("Campaign: value is %d bytes, over the %d-byte limit", len(value), maxValueLen))
	}
	e.mu.Lock()
	if e.lead != nil && !e.lead.ended() {
		e.mu.Unlock()
		return nil, invalid(fmt.Sprintf("Campaign: this Election leads %q already (Resign first)", e.name))
	}
	e.lead = nil
	e.mu.Unlock()
	// The whole campaign is one operation of the Locker's, its pauses
	// between publishes and between campaigns included: Close waits for
	// it and ends its pauses (l.quit), as it does a Lock's wait
	// (docs/design.md §9).
	if e.l.live.isClosed() || !e.l.enter() { // Shutdown or Close
		return nil, closedError("campaign", e.name)
	}
	defer e.l.ops.Done()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	var short error // the last publish that fell short, once a lock was given back
	for attempt := 1; ; attempt++ {
		lk, err := e.l.lock(ctx, "Campaign", e.t, opts)
		if err != nil {
			if short != nil && !errors.Is(err, ErrClosed) {
				return nil, fmt.Errorf("redlock: campaign %q: %w (a lock it took earlier was given back: %w)", e.name, err, short)
			}
			return nil, err
		}
		// Its release passes the queue even if this Campaign never waited:
		// other campaigners are queued as a rule, and a release that only
		// announced would let this campaigner, resigning and campaigning again
		// at once, take the key back before the waiter it woke rounds, term
		// after term (docs/design.md §21, the liveness bound). Set before lk
		// is shared.
		lk.mu.Lock()
		lk.waited = true
		lk.mu.Unlock()
		if keep {
			if err := lk.Keep(); err != nil {
				lk.Unlock(context.WithoutCancel(ctx))
				return nil, err
			}
		}
		if e.l.afterKeep != nil {
			e.l.afterKeep()
		}
		err = e.publishLead(ctx, lk, value, &t)
		if err == nil && lk.isReleased() {
			// Our own Shutdown released the lock while its value was
			// published: the campaign did not win what it returns.
			return nil, closedError("campaign", e.name)
		}
		if err == nil {
			e.mu.Lock()
			e.lead = lk
			e.mu.Unlock()
			return lk, nil
		}
		// The value did not reach a majority of the masters that hold the
		// key (one of them stopped answering, or the lock was lost): the
		// lock is given back, handed on to the longest-waiting campaigner,
		// and this one queues again (docs/design.md §21, liveness), after
		// a pause as between failed rounds.
		lk.Unlock(context.WithoutCancel(ctx))
		if !e.l.live.isClosed() && !e.l.isClosing() && ctx.Err() == nil &&
			e.l.env.sleep(ctx, e.l.quit, e.l.backoff(attempt), nil, &t) == wakeTimer {
			short = err
			continue
		}
		if e.l.live.isClosed() || e.l.isClosing() {
			// Our own Shutdown (or Close) released the leadership
			// under the publish, or ended the pause: say so, not
			// another owner.
			return nil, closedError("campaign", e.name)
		}
		return nil, err
	}
}

// publishLead publishes value for the leadership lk has just taken, in up
// to publishAttempts rounds. A round that timed out (a master slow to
// answer a fresh connection's first script, or one its stream skips for a
// MasterTimeout after a fault) is tried again a MasterTimeout later,
// while the lock lasts that long: at once, it would meet the same skipped
// masters. It returns the last round's error when none succeeded.
func (e *Election) publishLead(ctx context.Context, lk *Lock, value string, t **time.Timer) error {
	for attempt := 1; ; attempt++ {
		err := e.publish(ctx, lk, value)
		if err == nil {
			return nil
		}
		pause := e.l.opts.MasterTimeout
		if attempt == publishAttempts || ctx.Err() != nil || !lk.Valid() || lk.Deadline().Sub(e.l.env.now()) <= 2*pause ||
			e.l.env.sleep(ctx, e.l.quit, pause, nil, t) != wakeTimer {
			return err
		}
	}
}

// Proclaim publishes value as the leader's without giving up leadership:
// on a majority of masters, before the leadership's deadline. It fails
// with an error wrapping ErrLost when this Election does not lead (never
// did, resigned, or lost it), or when no majority took the value in time.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if ctx == nil {
		return nilContext("Proclaim")
	}
	if len(value) > maxValueLen {
		return invalid(fmt.Sprintf("Proclaim: value is %d bytes, over the %d-byte limit", len(value), maxValueLen))
	}
	lk := e.leading()
	if lk == nil {
		return &Error{Op: "proclaim", Resource: e.name, Need: e.l.need, Reason: "this Election does not lead", kind: ErrLost}
	}
	return e.publish(ctx, lk, value)
}

// Resign gives up leadership at once: it unlocks the leadership's lock
// (Lock.Unlock: Done closes before the first release), and the release
// wakes the next campaigner. It returns an error wrapping ErrUnlocked when
// this Election does not lead, and Unlock's errors otherwise.
func (e *Election) Resign(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Resign")
	}
	e.mu.Lock()
	lk := e.lead
	e.lead = nil
	e.mu.Unlock()
	if lk == nil {
		return &Error{Op: "resign", Resource: e.name, Need: e.l.need, Reason: "this Election does not lead", kind: ErrUnlocked}
	}
	if lk.ended() {
		// Lost (or released) already: it leads no more. What may be left
		// of its keys is released all the same.
		_ = lk.Unlock(ctx)
		return &Error{Op: "resign", Resource: e.name, Need: e.l.need, Reason: "this Election does not lead: its leadership had ended", kind: ErrUnlocked}
	}
	return lk.Unlock(ctx)
}

// leading returns the leadership while it lasts, else nil.
func (e *Election) leading() *Lock {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lead == nil || e.lead.ended() {
		return nil
	}
	return e.lead
}

// publish writes lk's term and value on every master where lk's key
// holds its token, and succeeds when a majority did so before lk's
// deadline.
func (e *Election) publish(ctx context.Context, lk *Lock, value string) (err error) {
	l := e.l
	if !l.enter() {
		return closedError("proclaim", e.name)
	}
	defer l.ops.Done()
	ctx, span := l.tel.start(ctx, "Proclaim", e.name)
	defer func() { end(span, err) }()
	res := l.round(ctx, l.env.now(), false, func(c *cmd) bool {
		c.kind, c.key, c.token, c.n = cmdLeaderWrite, e.t.key, lk.token, lk.fence
		c.setWaiter(value)
		return true
	})
	l.tel.round(ctx, l, "proclaim", res)
	if res.Reached && l.env.now().Before(lk.Deadline()) {
		return nil
	}
	return e.publishFailed(ctx, res)
}

// publishFailed is the error of a publish round res that did not reach a
// majority before the deadline: why, and the context's cause when it
// ended the round.
func (e *Election) publishFailed(ctx context.Context, res quorum.Result) error {
	l := e.l
	reason := "no majority of masters took the value before the leadership's deadline"
	if res.Count(quorum.Refused) > len(res.Replies)-l.need {
		reason = "the leadership's key is another owner's, or a later term is recorded, on too many masters"
	}
	var cause error
	if res.Err != nil {
		cause = context.Cause(ctx)
	}
	return &Error{Op: "proclaim", Resource: e.name, Need: l.need, Masters: l.nodeResults(res), Reason: reason, kind: ErrLost, cause: cause}
}

// Leader returns the leader that a majority of masters report, read in
// one round that waits for every master (at most MasterTimeout): the
// holder of the election's lock, with the term and value it published.
// It is a reading at one instant, a hint (docs/design.md §21): the leader
// may have lost its lock since. With no such majority (no leader, a
// leader that has not published yet, or masters that disagree or do not
// answer) it returns an error wrapping ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (lead Leader, err error) {
	if ctx == nil {
		return Leader{}, nilContext("Leader")
	}
	ctx, span := e.l.tel.start(ctx, "Leader", e.name)
	defer func() { end(span, err) }()
	return e.leader(ctx)
}

// leader is Leader without a span of its own (Observe's readings).
func (e *Election) leader(ctx context.Context) (Leader, error) {
	l := e.l
	if !l.enter() {
		return Leader{}, closedError("leader", e.name)
	}
	defer l.ops.Done()
	texts := &semBits{bits: make([]string, len(l.streams))}
	start := l.env.now()
	res := l.round(ctx, start, true, func(c *cmd) bool {
		c.kind, c.key, c.setMore().bits = cmdLeaderRead, e.t.key, texts
		return true
	})
	l.tel.round(ctx, l, "leader", res)
	return e.leaderOf(ctx, res, texts.take(), start)
}

// leaderOf is what a Leader round that began at start, with its replies
// res and each master's answer in reads, reports: the leader a majority
// names (the same term, token digest and value), its Deadline the
// need-th latest of their keys' expiries; or why none.
func (e *Election) leaderOf(ctx context.Context, res quorum.Result, reads []string, start time.Time) (Leader, error) {
	l := e.l
	type vote struct {
		term        uint64
		digest, val string
		expires     []time.Time
	}
	var votes []*vote
	for i, r := range res.Replies {
		if r.Outcome != quorum.OK {
			continue
		}
		term, digest, val, pttl, ok := parseLeaderRead(reads[i])
		if !ok {
			continue
		}
		at := start.Add(r.Latency).Add(pttl)
		j := slices.IndexFunc(votes, func(v *vote) bool { return v.term == term && v.digest == digest && v.val == val })
		if j < 0 {
			votes = append(votes, &vote{term: term, digest: digest, val: val})
			j = len(votes) - 1
		}
		votes[j].expires = append(votes[j].expires, at)
	}
	for _, v := range votes {
		if len(v.expires) >= l.need {
			// The keys stand on a majority until the need-th latest
			// expiry among the masters that report this leader.
			slices.SortFunc(v.expires, func(a, b time.Time) int { return b.Compare(a) })
			return Leader{Value: v.val, Term: v.term, Deadline: v.expires[l.need-1]}, nil
		}
	}
	reason := "no leader is reported by a majority of masters"
	if res.OK < l.need {
		reason = "fewer than a majority of masters answered"
	}
	var cause error
	if res.Err != nil {
		cause = context.Cause(ctx)
	}
	return Leader{}, &Error{Op: "leader", Resource: e.name, Need: l.need, Masters: l.nodeResults(res), Reason: reason, kind: ErrNoLeader, cause: cause}
}

// parseLeaderRead reads leader_read.lua's answer: ok only for a record
// that is the holder's ("2 <pttl> <term> <digest> <value>").
func parseLeaderRead(s string) (term uint64, digest, value string, pttl time.Duration, ok bool) {
	f := strings.SplitN(s, " ", 5)
	if len(f) != 5 || f[0] != "2" {
		return 0, "", "", 0, false
	}
	ms, err1 := strconv.ParseInt(f[1], 10, 64)
	term, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || ms < 0 {
		return 0, "", "", 0, false
	}
	return term, f[3], f[4], time.Duration(ms) * time.Millisecond, true
}

// observePoll is how often Observe reads the leader when no message
// comes: the fallback for a leader that dies (its keys expire with no
// message) and for messages lost.
func (e *Election) observePoll() time.Duration {
	return min(max(e.l.opts.TTL/4, 50*time.Millisecond), time.Second)
}

// Observe delivers each new leader, and each new value of a leader, as a
// majority of masters report it (Leader), until ctx ends; then it closes
// the channel. A change is pushed by the masters (the leader's publication
// and releases of its lock, over the Locker's pub/sub connections where
// the masters' clients have them), and read every quarter of the TTL (at
// least every second) when nothing comes. Terms never go back: a reading
// of an older term than the last delivered is dropped, so a slow reader
// sees fewer changes, never an older one. Times without a leader are not
// delivered. The channel also closes when the Locker closes.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if ctx == nil {
		close(out)
		return out
	}
	w := e.l.watch(e.t.key, e.t.key+leaderSuffix)
	go func() {
		defer close(out)
		e.observe(ctx, w, func(lead Leader, _ time.Time) bool {
			select {
			case out <- lead:
				return true
			case <-ctx.Done():
			case <-e.l.quit.Done():
			}
			return false
		})
	}()
	return out
}

// observe is Observe's loop, on watcher w (which it stops): it reads the
// leader at once, then on each push and every observePoll, and hands
// deliver each reading (and when it began) that is a new leader or a new
// value, never an older term than the last delivered, until ctx ends, the
// Locker closes or deliver reports false. The simulator runs it with a
// deliver of its own (docs/design.md §20).
func (e *Election) observe(ctx context.Context, w *watcher, deliver func(lead Leader, asked time.Time) bool) {
	defer w.stop()
	var last Leader
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for delay := time.Duration(0); ; delay = e.observePoll() {
		if delay > 0 {
			switch e.l.env.sleep(ctx, e.l.quit, delay, w.c, &t) {
			case wakeCtx, wakeClosed:
				return
			}
		}
		asked := e.l.env.now()
		now, err := e.leader(ctx)
		if err != nil || now.Term < last.Term || now.Term == last.Term && now.Value == last.Value {
			continue
		}
		if !deliver(now, asked) {
			return
		}
		last = now
	}
}

// watch subscribes, on every master that has a subscription connection,
// to the channels names, and returns the watcher that their messages
// poke. Nothing here is needed for correctness: a message lost, or a
// master without the connection, leaves the observer to its poll.
func (l *Locker) watch(names ...string) *watcher {
	w := l.wake
	x := &watcher{w: w, names: names, c: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return x
	}
	if w.watched == nil {
		w.watched = map[string][]*watcher{}
	}
	for _, n := range names {
		w.watched[n] = append(w.watched[n], x)
	}
	if w.subs == nil {
		w.startLocked()
	}
	w.notifyLocked()
	return x
}
