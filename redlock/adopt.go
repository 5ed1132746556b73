package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// maxTokenLen is the longest token Adopt accepts, in bytes: far more than
// this package's tokens (an owner label of at most maxOwnerLabelLen, "/"
// and 22 characters) or redsync's (24).
const maxTokenLen = 1024

// Adopt takes over the lock on resource whose keys hold token (persisted
// from Lock.Token across a restart, or handed over), without changing them.
// One round reads every master; a majority must hold token, else the error
// wraps ErrNotAcquired. The deadline comes from the keys' remaining PTTLs,
// not a fresh TTL (docs/design.md §16), and with Options.Fencing the fence
// is the one the lock was granted. The result is a full Lock. Two processes
// that adopt one token both believe they hold the lock: Adopt hands a lock
// over, it does not take it from its holder.
func (l *Locker) Adopt(ctx context.Context, resource, token string, opts ...LockOption) (lk *Lock, err error) {
	if ctx == nil {
		return nil, nilContext("Adopt")
	}
	switch {
	case token == "":
		return nil, invalid("Adopt: empty token (pass the Token of the lock to adopt)")
	case len(token) > maxTokenLen:
		return nil, invalid(fmt.Sprintf("Adopt: token is %d bytes, over the %d-byte limit", len(token), maxTokenLen))
	}
	t, err := l.target(resource)
	if err != nil {
		return nil, err
	}
	ttl, budget, err := l.ttlBudget(l.opts.TTL, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := l.tel.start(ctx, "Adopt", resource)
	defer func() { end(span, err) }()
	if l.live.isClosed() || !l.enter() { // Shutdown or Close
		return nil, closedError("adopt", resource)
	}
	defer l.ops.Done()
	if err := l.invalidErr(); err != nil {
		return nil, err
	}
	fail := func(res quorum.Result, reason string, cause error) error {
		return &Error{Op: "adopt", Resource: resource, Need: l.need, Masters: l.nodeResults(res), Reason: reason, kind: ErrNotAcquired, cause: cause}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "adopt", Resource: resource, Need: l.need, Masters: l.untried(), kind: ErrNotAcquired, cause: context.Cause(ctx)}
	}
	start := l.env.now()
	// Every master is waited for (each up to MasterTimeout): the more of
	// them are known to hold the token, the later the deadline can be.
	res := l.round(ctx, start, true, func(c *cmd) bool {
		t.set(c)
		c.kind, c.token, c.fenced = cmdAdopt, token, l.opts.Fencing
		return true
	})
	elapsed := l.env.now().Sub(start)
	l.tel.round(ctx, l, "adopt", res)
	switch {
	case res.Err != nil:
		return nil, fail(res, "", context.Cause(ctx))
	case !res.Reached:
		if ref := refusal(l.nodeResults(res)); ref != nil {
			return nil, fail(res, "", ref)
		}
		return nil, fail(res, "no majority of masters holds the token", nil)
	}
	var pttls []time.Duration
	var fence uint64
	mayHold := make([]bool, len(res.Replies))
	for i, r := range res.Replies {
		// Masters that did not answer may hold the key: Unlock asks them
		// too (a compare-and-delete, harmless where the key is not ours).
		mayHold[i] = r.Outcome != quorum.Refused
		if r.Outcome != quorum.OK {
			continue
		}
		pttls = append(pttls, time.Duration(r.Value)*time.Millisecond)
		if r.Aux != 0 && fence == 0 {
			fence = r.Aux
		}
	}
	if l.opts.Fencing && fence == 0 {
		return nil, fail(res, "its fence cannot be recovered: no master holding the token has a fence counter written back under it (the lock was taken without Options.Fencing, or by another library)", nil)
	}
	left := adoptedTTL(pttls, len(res.Replies), l.need)
	b := l.opts.budget()
	b.TTL = max(left, ttl) // the drift allowance of the longer
	window := left - b.Drift() - l.opts.MasterTimeout - l.opts.SafetyMargin
	info := Acquisition{
		Start: start, Elapsed: elapsed, TTL: left, Drift: b.Drift(), SafetyMargin: l.opts.SafetyMargin,
		Validity: window - elapsed, Masters: l.nodeResults(res),
	}
	if info.Validity <= 0 {
		return nil, fail(res, fmt.Sprintf("no validity left: the keys' time left %v, less drift %v, MasterTimeout %v, SafetyMargin %v and the round's %v, is not positive",
			left, b.Drift(), l.opts.MasterTimeout, l.opts.SafetyMargin, elapsed), nil)
	}
	lk = &Lock{locker: l, target: t, token: token, fence: fence, mayHold: mayHold, ttl: ttl, budget: budget, deadline: start.Add(window), acq: l.pack(info)}
	if !l.live.add(lk) { // Shutdown began during the round (nothing was taken)
		return nil, closedError("adopt", resource)
	}
	l.tel.hold(lk)
	if l.log.Enabled(ctx, slog.LevelDebug) { // its attributes cost allocations
		l.log.DebugContext(ctx, "redlock: adopted", l.logResource(resource), "token", shortToken(token), "fence", fence, "validity", info.Validity)
	}
	return lk, nil
}

// adoptedTTL is how long the keys of a lock held on the masters with the
// given PTTLs (len ≥ need) are sure to keep another owner out, counted
// from before they were read: the (|S| − (n − need))-th smallest of them
// (docs/design.md §16). Until that many of them expired, the masters still
// holding ours and the n − |S| others leave fewer than need for anyone
// else.
func adoptedTTL(pttls []time.Duration, n, need int) time.Duration {
	s := slices.Clone(pttls)
	slices.Sort(s)
	return s[len(s)-(n-need)-1]
}
