package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
	"github.com/redis/go-redis/v9"
)

// Locker acquires locks on a fixed set of independent Redis masters. It is
// safe for concurrent use. Close it when done: it owns the calls still
// running against masters that stopped answering.
type Locker struct {
	masters []redis.UniversalClient
	addrs   []string
	opts    Options
	budget  validity.Budget
	need    int
	group   *quorum.Group
	scripts scripts
	log     *slog.Logger
	janitor *janitor

	// betweenRounds, when set by tests (export_test.go), runs between the
	// two rounds of a fenced acquisition.
	betweenRounds func()
}

// New returns a Locker over masters, which must be independent Redis
// masters (not replicas of each other): the guarantee rests on a majority
// of them agreeing. The clients are the caller's; Close does not close them.
// A nil opts means all defaults. New reports the first rule the arguments
// break, as an error wrapping ErrInvalid.
func New(masters []redis.UniversalClient, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(masters) == 0 {
		return nil, invalid("no masters: a lock needs at least one (Redlock: an odd number such as 5)")
	}
	addrs := make([]string, len(masters))
	seen := map[string]int{}
	for i, m := range masters {
		if m == nil || isNilPointer(m) {
			return nil, invalid(fmt.Sprintf("master %d is a nil client", i))
		}
		addrs[i] = clientAddr(m)
		ids := []string{fmt.Sprintf("%p", m)}
		if addrs[i] != "" {
			ids = append(ids, addrs[i])
		}
		for _, id := range ids {
			if j, dup := seen[id]; dup {
				return nil, invalid(fmt.Sprintf("masters %d and %d are the same master (%s): a quorum needs independent masters", j, i, id))
			}
			seen[id] = i
		}
	}
	g, err := quorum.NewGroup(len(masters), o.NodeTimeout)
	if err != nil {
		return nil, invalid(err.Error())
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Locker{
		masters: append([]redis.UniversalClient(nil), masters...),
		addrs:   addrs,
		opts:    o,
		budget:  o.budget(),
		need:    validity.Majority(len(masters)),
		group:   g,
		scripts: newScripts(),
		log:     log,
		janitor: newJanitor(len(masters)),
	}, nil
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// clientAddr names a master for the duplicate check and for NodeResult.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return strings.ToLower(c.Options().Addr)
	case *redis.ClusterClient:
		return strings.ToLower(strings.Join(c.Options().Addrs, ","))
	}
	return ""
}

// Options returns the options in force, defaults filled in.
func (l *Locker) Options() Options { return l.opts }

// Close waits for every call still running against the masters (calls that
// overran NodeTimeout keep running until the client gives up on them, which
// for go-redis is its ReadTimeout) and makes further calls fail with
// ErrClosed. Locks already handed out can no longer be extended or released
// through this Locker, and releases still waiting for a stalled master are
// dropped: those keys expire with their TTL.
func (l *Locker) Close() error {
	l.janitor.close()
	return l.group.Close()
}

// TryLock makes one acquisition round for resource: it asks every master at
// once and returns as soon as a majority granted the lock with validity
// left, or as soon as that became impossible. On failure every master is
// released before TryLock returns, and the error wraps ErrNotAcquired (and
// ctx's error if ctx ended first); errors.As gives an *Error with the
// outcome on each master.
func (l *Locker) TryLock(ctx context.Context, resource string) (*Lock, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	return l.acquire(ctx, resource)
}

// Lock acquires resource, retrying failed rounds with jittered exponential
// backoff (Options.Retry) until it succeeds, ctx ends, or the policy's
// MaxAttempts is spent. When ctx ends, the error satisfies
// errors.Is(err, ctx.Err()).
func (l *Locker) Lock(ctx context.Context, resource string) (*Lock, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	var timer *time.Timer
	for attempt := 1; ; attempt++ {
		lk, err := l.acquire(ctx, resource)
		if err == nil || !errors.Is(err, ErrNotAcquired) {
			return lk, err
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) {
				return nil, err
			}
			return nil, fmt.Errorf("redlock: lock %q: %w (last attempt: %w)", resource, context.Cause(ctx), err)
		}
		if m := l.opts.Retry.MaxAttempts; m > 0 && attempt >= m {
			return nil, fmt.Errorf("redlock: gave up after %d attempts: %w", attempt, err)
		}
		d := l.backoff(attempt)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redlock: lock %q: waiting to retry: %w (last attempt: %w)", resource, context.Cause(ctx), err)
		case <-timer.C:
		}
	}
}

func (l *Locker) backoff(attempt int) time.Duration {
	p := l.opts.Retry
	// MinDelay·2^(n−1), capped at MaxDelay without ever computing a
	// product that could overflow: the shift is taken only when
	// MinDelay ≤ MaxDelay / 2^(n−1).
	d := p.MaxDelay
	if n := attempt - 1; n >= 0 && n < 63 && p.MinDelay <= p.MaxDelay>>n {
		d = p.MinDelay << n
	}
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func (l *Locker) acquire(ctx context.Context, resource string) (*Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "acquire", Resource: resource, Need: l.need, Nodes: l.untried(), kind: ErrNotAcquired, cause: context.Cause(ctx)}
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	key := lockKey(l.opts.KeyPrefix, resource)
	keys := []string{key, fenceKey(key)}
	ttl := l.opts.TTL.Milliseconds()
	h := newHolding(len(l.masters))
	start := time.Now()
	res := quorum.Run(ctx, l.group, quorum.Op[uint64]{
		Need: l.need,
		Call: func(ctx context.Context, i int) (uint64, error) {
			if !l.opts.Fencing {
				ok, err := l.masters[i].SetNX(ctx, key, token, l.opts.TTL).Result()
				if err == nil && !ok {
					err = quorum.ErrRefused
				}
				return 0, err
			}
			s, err := l.scripts.acquireFenced.Run(ctx, l.masters[i], keys, token, ttl).Text()
			if errors.Is(err, redis.Nil) {
				return 0, quorum.ErrRefused
			}
			if err != nil {
				return 0, err
			}
			c, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("redlock: master %d has a corrupt fence counter %q: %w", i, s, err)
			}
			return c, nil
		},
		Late: func(i int, rep quorum.Reply[uint64]) {
			if !h.landed(i, errors.Is(rep.Err, quorum.ErrRefused)) {
				return
			}
			if rep.Err != nil {
				// No answer: the SET may still land when the master wakes.
				l.deferRelease([]int{i}, key, token)
				return
			}
			l.releaseOne(i, key, token)
		},
	})
	decided(h, res)
	info := Acquisition{
		Start: start, TTL: l.opts.TTL, Drift: l.budget.Drift(), SafetyMargin: l.opts.SafetyMargin,
		Nodes: nodeResultsOf(l, res.Replies),
	}
	// check settles a round: nil to go on, or the error after releasing
	// every master.
	check := func(op string, res quorum.Result[uint64]) error {
		info.Elapsed = time.Since(start)
		info.Validity = l.budget.Validity(info.Elapsed)
		e := &Error{Op: op, Resource: resource, Need: l.need, Nodes: info.Nodes, kind: ErrNotAcquired}
		switch {
		case res.Err == nil && res.Reached && info.Validity > 0:
			return nil
		case errors.Is(res.Err, quorum.ErrClosed):
			h.settle(gone)
			return ErrClosed
		case res.Err != nil:
			e.cause = context.Cause(ctx)
		case res.Reached:
			e.Reason = fmt.Sprintf("majority arrived after %v, past the validity window %v", info.Elapsed, l.budget.Window())
		}
		h.settle(gone)
		l.release(ctx, key, token, h)
		l.log.Debug("redlock: acquire failed", "resource", resource, "token", shortToken(token), "err", e)
		return e
	}
	if err := check("acquire", res); err != nil {
		return nil, err
	}
	var fence uint64
	if l.opts.Fencing {
		// DESIGN.md §5: t = max over the acquired majority + 1, written back
		// to a majority that still holds our token, before the deadline.
		for _, r := range res.Replies {
			if r.Outcome == quorum.OK {
				fence = max(fence, r.Value+1)
			}
		}
		if l.betweenRounds != nil {
			l.betweenRounds()
		}
		wres := quorum.Run(ctx, l.group, quorum.Op[uint64]{
			Need: l.need,
			Call: func(ctx context.Context, i int) (uint64, error) {
				n, err := l.scripts.writeback.Run(ctx, l.masters[i], keys, token, strconv.FormatUint(fence, 10)).Int64()
				if err == nil && n == 0 {
					err = quorum.ErrRefused
				}
				return 0, err
			},
		})
		info.Nodes = nodeResultsOf(l, wres.Replies)
		if err := check("fence", wres); err != nil {
			return nil, err
		}
	}
	lk := &Lock{locker: l, resource: resource, key: key, token: token, fence: fence, hold: h, deadline: l.budget.Deadline(start), info: info}
	h.settle(held)
	l.log.Debug("redlock: acquired", "resource", resource, "token", shortToken(token), "fence", fence, "elapsed", info.Elapsed, "validity", info.Validity)
	return lk, nil
}

func (l *Locker) untried() []NodeResult {
	nodes := make([]NodeResult, len(l.masters))
	for i := range nodes {
		nodes[i] = NodeResult{Addr: l.addrs[i], Outcome: quorum.Canceled}
	}
	return nodes
}

func nodeResultsOf[T any](l *Locker, reps []quorum.Reply[T]) []NodeResult {
	nodes := make([]NodeResult, len(reps))
	for i, r := range reps {
		nodes[i] = NodeResult{Addr: l.addrs[i], Outcome: r.Outcome, Latency: r.Latency, Err: r.Err}
		if r.Outcome == quorum.Refused {
			nodes[i].Err = nil
		}
	}
	return nodes
}

// release deletes token's key on every master in parallel and waits for
// each to answer or reach NodeTimeout. Where the lock's own SET was never
// sent it sends nothing; where that SET is still in flight it first waits
// for its reply (see holding). It does not depend on ctx being alive: a
// cancelled caller must still not leave keys behind. A master counts as OK
// when the key is gone afterwards (deleted now, or already absent) and as
// Refused when another owner's token is there. Masters that did not answer
// get the release later, when they answer again (see janitor.go).
func (l *Locker) release(ctx context.Context, key, token string, h *holding) quorum.Result[int64] {
	res := quorum.Run(context.WithoutCancel(ctx), l.group, quorum.Op[int64]{
		Need:    l.need,
		WaitAll: true,
		Call: func(ctx context.Context, i int) (int64, error) {
			switch h.awaitSet(ctx, i) {
			case setNone:
				return 0, errSkipped
			case setStillFlying:
				return 0, context.Cause(ctx)
			}
			n, err := l.scripts.release.Run(ctx, l.masters[i], []string{key}, token).Int64()
			if err == nil && n < 0 {
				err = quorum.ErrRefused
			}
			return n, err
		},
	})
	if res.Err == nil {
		l.deferRelease(undelivered(res), key, token)
	}
	return res
}

// errSkipped marks a master the release round had nothing to send to: the
// lock's SET was never sent there, or was refused.
var errSkipped = errors.New("redlock: nothing to release here (the acquire call was never sent, or refused)")

// releaseOne deletes a late-landed key on one master. It runs on a
// goroutine the group owns, bounded by NodeTimeout.
func (l *Locker) releaseOne(i int, key, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.NodeTimeout)
	defer cancel()
	if err := l.scripts.release.Run(ctx, l.masters[i], []string{key}, token).Err(); err != nil {
		l.log.Debug("redlock: releasing a late-landed key failed; deferring it", "master", l.addrs[i], "err", err)
		l.deferRelease([]int{i}, key, token)
	}
}
