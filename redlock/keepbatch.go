package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The keeper's batched extensions: one extend_batch.lua call per master
// for every lock due at once (docs/design.md §8, "Batched extensions").

// batchable reports whether the keeper extends lk in a batch: a lock on
// one key that Extend would extend with extend.lua (not a read lock, not
// a semaphore's permit, whose record is extended with it), on a Locker
// without a Redis Cluster master (whose keys of one call must share a slot).
func (lk *Lock) batchable() bool {
	return !lk.multi() && lk.mode != modeRead && lk.permits == 0 && !lk.locker.hasClusterMaster()
}

// extendBatch is the keeper's extension of several Helds at once
// (docs/design.md §8, "Batched extensions"): one extend_batch.lua call
// per master carries every lock, and each lock is decided on its own
// exactly as Extend decides it. Each lock's extension mutex (extMu) is
// held from before the batch's start to its decision, as Extend holds
// it, and its mutex only to read it and to settle it; validity counts from
// the batch's start, taken before anything is sent; a lock succeeds only
// when a majority extended its key, validity is left and its current
// deadline has not passed. A lock the batch does not extend (or cannot
// carry: unlocked, lapsed, Locker closed) goes down the single path,
// extendOnce, which retries it or ends it as before.
func extendBatch(hs []*lifetime) {
	l := hs[0].lk.locker
	in, single := claimBatch(hs)
	// After every lock is unlocked: the workers take them one by one, in
	// parallel, as they take the locks that are never batched.
	defer func() { l.keeper.single(single) }()
	if len(in) == 0 {
		return
	}
	if !l.enter() {
		for _, h := range in {
			h.unlockBatched()
		}
		single = in // each gets ErrClosed and leaves
		return
	}
	defer l.ops.Done()
	start := l.env.now()
	in, b, first, last, late := batchOf(in, start)
	single = append(single, late...)
	if len(in) == 0 {
		return
	}
	// An answer after the last deadline is worthless to every lock.
	ctx, cancel := l.until(context.Background(), last)
	defer cancel()
	ctx, stop := l.keepContext(ctx, start)
	defer stop()
	res := l.extendRound(ctx, start, l.keepWait(first), b)
	elapsed := l.env.now().Sub(start)
	l.pace.record(elapsed)
	l.tel.round(ctx, l, "extend", res)
	single = append(single, settleBatch(in, b, res, start, elapsed)...)
}

// claimBatch takes each of hs for a batched extension: its busy mutex and
// its Lock's extension mutex held (in), or, when another worker or an
// Extend has it, for the single path (single); one that left the keeper,
// or whose context ended, is dropped.
func claimBatch(hs []*lifetime) (in, single []*lifetime) {
	for _, h := range hs {
		k := &h.lk.locker.keeper
		if !h.busy.TryLock() {
			// Another worker extends it, or Unlock stops it: the single
			// path waits for that, then does what is left.
			single = append(single, h)
			continue
		}
		k.mu.Lock()
		left := h.left
		k.mu.Unlock()
		switch {
		case left:
			h.busy.Unlock()
			continue
		case h.ctx.Err() != nil:
			k.leave(h)
			h.busy.Unlock()
			continue
		}
		if !h.lk.extMu.TryLock() {
			h.busy.Unlock()
			single = append(single, h) // an Extend of the caller's is under way
			continue
		}
		in = append(in, h)
	}
	return in, single
}

// unlockBatched releases what claimBatch took of h.
func (h *lifetime) unlockBatched() {
	h.lk.extMu.Unlock()
	h.busy.Unlock()
}

// batchOf is the batch of in's locks still to extend at start (in, kept in
// place), their earliest and latest deadlines, and those released or past
// their deadline (late: unlocked, for the single path).
func batchOf(in []*lifetime, start time.Time) (kept []*lifetime, b *extBatch, first, last time.Time, late []*lifetime) {
	b = &extBatch{need: in[0].lk.locker.need}
	n := 0
	for _, h := range in {
		lk := h.lk
		lk.mu.Lock()
		released, deadline, ttl := lk.released, lk.deadline, lk.ttl
		lk.mu.Unlock()
		if released || !start.Before(deadline) {
			h.unlockBatched()
			late = append(late, h)
			continue
		}
		in[n] = h
		n++
		b.keys = append(b.keys, lk.key)
		b.tokens = append(b.tokens, lk.token)
		b.ttls = append(b.ttls, uint64(ttl.Milliseconds()))
		last = later(last, deadline)
		if first.IsZero() || deadline.Before(first) {
			first = deadline
		}
	}
	return in[:n], b, first, last, late
}

// settleBatch decides each lock of a batched extension begun at start
// from the round res, and unlocks it; those for the single path are
// returned.
func settleBatch(in []*lifetime, b *extBatch, res quorum.Result, start time.Time, elapsed time.Duration) (single []*lifetime) {
	l := in[0].lk.locker
	now := l.env.now()
	refused := refusal(l.nodeResults(res))
	for i, h := range in {
		lk := h.lk
		lk.mu.Lock()
		if lk.released {
			// Unlocked during the round: nothing of it counts.
			lk.mu.Unlock()
			l.keeper.leave(h)
			h.unlockBatched()
			continue
		}
		if int(b.ok[i]) >= l.need && lk.budget.Validity(elapsed) > 0 && now.Before(lk.deadline) {
			lk.setDeadlineLocked(lk.budget.Deadline(start)) // re-arms h.lost and plans the next
			l.tel.extension(h.ctx, outExtended, lk.resource)
			if h.failed > 0 {
				l.log.InfoContext(h.ctx, "redlock: extended after a failure", l.logResource(lk.resource), "token", shortToken(lk.token), "failed", h.failed)
			}
			h.failed = 0
			lk.mu.Unlock()
			h.unlockBatched()
			continue
		}
		// Not extended. A refusal by the masters' ACL ends the lifetime
		// (the single path returns ErrInvalid and leaves); otherwise, as
		// after a failed Extend, retry while time remains (in a batch
		// again: a failed batch must not turn into one call per lock,
		// just when the masters are slow), or leave past the deadline,
		// where the timer ends the lock.
		if refused != nil {
			lk.mu.Unlock()
			h.unlockBatched()
			single = append(single, h)
			continue
		}
		h.failed++
		deadline := lk.deadline
		var err error
		switch {
		case !now.Before(deadline):
			l.keeper.leave(h)
		case int(b.ok[i]) < l.need:
			err = &Error{Op: "extend", Resource: lk.resource, Need: l.need, Reason: "no majority extended the key in a batched extension", kind: ErrLost}
		default:
			err = &Error{Op: "extend", Resource: lk.resource, Need: l.need, Reason: lateReason(elapsed, lk.budget), kind: ErrLost}
		}
		l.tel.extension(h.ctx, outExtFailed, lk.resource)
		if err != nil {
			h.retryLocked(err, deadline)
		}
		lk.mu.Unlock()
		h.unlockBatched()
	}
	return single
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// extendRound sends b to every master and waits until each of its locks
// is decided (a majority extended it, or too few masters are left to),
// wait has passed since start (keepWait), or ctx ends. Each master's answer
// counts for a lock only if it came before the wait ended.
func (l *Locker) extendRound(ctx context.Context, start time.Time, wait time.Duration, b *extBatch) quorum.Result {
	n := len(l.streams)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.begin(n, cancel)
	r, _ := quorum.NewRound(n, l.need, true, start)
	// While other rounds are in flight, the streams' flushers write this
	// one's commands with theirs (pathConfig.Rounds).
	l.rounds.Add(1)
	defer l.rounds.Add(-1)
	cmds := make([]cmd, n)
	for i, s := range l.streams {
		c := &cmds[i]
		c.round, c.node, c.setMore().ext = r, i, b
		c.kind, c.key = cmdExtendBatch, b.keys[0]
		switch s.submit(c, start) {
		case refused:
			r.Skip(i, quorum.Unavailable, s.skipError())
			b.answered(i, false)
		case parked:
			r.Skip(i, quorum.Unavailable, errDeferred)
			b.answered(i, false)
		}
	}
	res := l.env.await(ctx, r, wait)
	b.stop()
	if errors.Is(context.Cause(ctx), errBatchDecided) {
		res.Err = nil
	}
	l.pace.observe(res)
	return res
}
