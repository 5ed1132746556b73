package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// A round: one command to every master, counted to a decision
// (docs/design.md §11), and the release round (§7).

// round sends one command to each master (fill sets it up; false skips
// the master) and waits for the decision: a majority, or with waitAll
// every master, each within MasterTimeout of start. A master that is not
// answering is not sent anything (Unavailable); a release for it is
// deferred until it answers again. Until every master has been dialled
// once, a round waits for all of them, so that two masters that turn out
// to be one server (run_id, on first contact) fail it with ErrInvalid
// rather than after it.
func (l *Locker) round(ctx context.Context, start time.Time, waitAll bool, fill func(c *cmd) bool) quorum.Result {
	return l.roundFor(ctx, start, waitAll, l.opts.MasterTimeout, l.need, fill)
}

// roundFor is round waiting up to wait from start instead of MasterTimeout
// (the keeper's extensions: keepWait), and decided by need OKs (1 ≤ need
// ≤ the masters) instead of a majority (a waiter completing its grants:
// complete).
func (l *Locker) roundFor(ctx context.Context, start time.Time, waitAll bool, wait time.Duration, need int, fill func(c *cmd) bool) quorum.Result {
	n := len(l.streams)
	waitAll = waitAll || int(l.tried.Load()) < n
	r, _ := quorum.NewRound(n, need, waitAll, start)
	// While other rounds are in flight, the streams' flushers write this
	// one's commands with theirs (pathConfig.Rounds).
	l.rounds.Add(1)
	defer l.rounds.Add(-1)
	cmds := make([]cmd, n)
	for i, s := range l.streams {
		c := &cmds[i]
		c.round, c.node = r, i
		if !fill(c) {
			r.Skip(i, quorum.Unavailable, errSkipped)
			continue
		}
		switch s.submit(c, start) {
		case refused:
			r.Skip(i, quorum.Unavailable, s.skipError())
		case parked:
			r.Skip(i, quorum.Unavailable, errDeferred)
		}
	}
	res := l.env.await(ctx, r, wait)
	l.pace.observe(res)
	return res
}

func (l *Locker) untried() []MasterResult {
	nodes := make([]MasterResult, len(l.masters))
	for i := range nodes {
		nodes[i] = MasterResult{Addr: l.addrs[i], Outcome: quorum.Canceled}
	}
	return nodes
}

func (l *Locker) nodeResults(res quorum.Result) []MasterResult {
	nodes := make([]MasterResult, len(res.Replies))
	for i, r := range res.Replies {
		nodes[i] = MasterResult{Addr: l.addrs[i], Outcome: r.Outcome, Latency: r.Latency, Err: r.Err}
		if r.Outcome == quorum.Refused {
			nodes[i].Err = nil
		}
	}
	return nodes
}

// release deletes token's key on every master where it may be (mayHold),
// and waits for each to answer or reach MasterTimeout, whatever ctx says: a
// cancelled caller must still not leave keys behind. On each master the
// release follows the SET it cleans up on the same ordered stream, so it
// can never run first. A master counts as OK when the key is
// gone afterwards (deleted now, or already absent) and as Refused when
// another owner's token is there. A master that is not answering gets the
// release when it answers again; one that does not answer in time gets it
// from the stream all the same.
// A release (not the clean-up of a failed round, which held no majority)
// also hands the key to the next caller in its queue, when there is reason
// to think someone queued: the lock was taken by a Lock that waited
// (waited), or a caller of this Locker has waited for the key lately.
// Otherwise the release only announces (docs/design.md §14.1 item 2).
// A lock the masters handed to a waiter (queueID, its id in the queue,
// docs/design.md §14.3) also takes that waiter off the queue where it may
// still be.
func (l *Locker) release(ctx context.Context, t target, token string, mayHold []bool, waited bool, queueID string) quorum.Result {
	return l.releaseRound(ctx, t, token, mayHold, queueID != "" || l.queued(t) && (waited || l.wake.contended(t.key)), queueID)
}

func (l *Locker) releaseRound(ctx context.Context, t target, token string, mayHold []bool, handOn bool, queueID string) quorum.Result {
	kind := cmdRelease
	switch {
	case t.multi():
		kind = cmdReleaseMulti
	case t.mode == modeRead:
		kind = cmdUnread
	}
	pop := releaseKeyOnly
	if handOn {
		pop = releasePop
		if t.mode == 0 && !t.multi() && !l.opts.Fencing {
			pop = releaseHand // and hand the key itself to a waiter that asked (§14.3)
		}
	}
	// The round waits for every master whatever ctx says (a cancelled
	// caller must not leave keys behind): ctx is only the telemetry's.
	res := l.round(context.Background(), l.env.now(), true, func(c *cmd) bool {
		t.set(c)
		c.kind, c.token, c.pop, c.pass = kind, token, pop, l.queueLife(pop)
		c.setWaiter(queueID)
		return mayHold[c.node]
	})
	if handOn {
		n := 0
		for _, r := range res.Replies {
			if r.Outcome == quorum.OK && r.Value >= 2 {
				n++
			}
		}
		if n >= l.need {
			l.wake.handed(t.key)
		}
	}
	l.tel.round(ctx, l, "release", res)
	l.tel.released(ctx, t.resource, res, l.need)
	return res
}

var (
	// errSkipped marks a master the release round had nothing to send to:
	// the lock's SET was never sent there, or was refused.
	errSkipped = errors.New("redlock: nothing to release here (the acquire was never sent, or refused)")
	// errDeferred marks a release held back until its master answers.
	errDeferred = errors.New("redlock: release deferred until the master answers again")
)
