package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
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
// through this Locker; their keys expire with their TTL.
func (l *Locker) Close() error { return l.group.Close() }

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
	d := p.MaxDelay
	if attempt < 32 {
		d = min(p.MinDelay<<(attempt-1), p.MaxDelay)
	}
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// holding is what a round's late replies need to know: whether the token
// they carry is (still) a held lock. A SET that lands on a master after the
// round failed, or after Unlock, is deleted when its reply arrives.
type holding struct {
	mu    sync.Mutex
	phase int // deciding, held, gone
}

const (
	deciding = iota
	held
	gone
)

// settle records the round's result. Late SETs that landed while the round
// was deciding need nothing more: a failed round releases every master
// after settling, and a held lock keeps them.
func (h *holding) settle(phase int) {
	h.mu.Lock()
	h.phase = phase
	h.mu.Unlock()
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
	h := &holding{}
	start := time.Now()
	res := quorum.Run(ctx, l.group, quorum.Op[struct{}]{
		Need: l.need,
		Call: func(ctx context.Context, i int) (struct{}, error) {
			ok, err := l.masters[i].SetNX(ctx, key, token, l.opts.TTL).Result()
			if err == nil && !ok {
				err = quorum.ErrRefused
			}
			return struct{}{}, err
		},
		Late: func(i int, _ struct{}, err error) {
			if err != nil {
				return
			}
			h.mu.Lock()
			phase := h.phase
			h.mu.Unlock()
			if phase == gone {
				l.releaseOne(i, key, token)
			}
		},
	})
	elapsed := time.Since(start)
	info := Acquisition{
		Start: start, Elapsed: elapsed, TTL: l.opts.TTL, Drift: l.budget.Drift(),
		SafetyMargin: l.opts.SafetyMargin, Validity: l.budget.Validity(elapsed),
		Nodes: nodeResultsOf(l, res.Replies),
	}
	fail := func(reason string, cause error) (*Lock, error) {
		h.settle(gone)
		l.release(ctx, key, token) // also covers the SETs that landed late
		e := &Error{Op: "acquire", Resource: resource, Need: l.need, Nodes: info.Nodes, Reason: reason, kind: ErrNotAcquired, cause: cause}
		l.log.Debug("redlock: acquire failed", "resource", resource, "token", shortToken(token), "err", e)
		return nil, e
	}
	switch {
	case errors.Is(res.Err, quorum.ErrClosed):
		return nil, ErrClosed
	case res.Err != nil:
		return fail("", context.Cause(ctx))
	case !res.Reached:
		return fail("", nil)
	case info.Validity <= 0:
		return fail(fmt.Sprintf("majority arrived after %v, past the validity window %v", elapsed, l.budget.Window()), nil)
	}
	lk := &Lock{locker: l, resource: resource, key: key, token: token, hold: h, deadline: l.budget.Deadline(start), info: info}
	h.settle(held)
	l.log.Debug("redlock: acquired", "resource", resource, "token", shortToken(token), "elapsed", elapsed, "validity", info.Validity)
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
// each to answer or reach NodeTimeout. It does not depend on ctx being
// alive: a cancelled caller must still not leave keys behind.
func (l *Locker) release(ctx context.Context, key, token string) quorum.Result[int64] {
	return quorum.Run(context.WithoutCancel(ctx), l.group, quorum.Op[int64]{
		Need:    l.need,
		WaitAll: true,
		Call: func(ctx context.Context, i int) (int64, error) {
			n, err := l.scripts.release.Run(ctx, l.masters[i], []string{key}, token).Int64()
			if err == nil && n == 0 {
				err = quorum.ErrRefused
			}
			return n, err
		},
	})
}

// releaseOne deletes a late-landed key on one master. It runs on a
// goroutine the group owns, bounded by NodeTimeout.
func (l *Locker) releaseOne(i int, key, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.NodeTimeout)
	defer cancel()
	if err := l.scripts.release.Run(ctx, l.masters[i], []string{key}, token).Err(); err != nil {
		l.log.Warn("redlock: releasing a late-landed key failed; it expires with its TTL", "master", l.addrs[i], "err", err)
	}
}
