package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"

	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
	"github.com/redis/go-redis/v9"
)

// Locker acquires locks on a fixed set of independent Redis masters. It is
// safe for concurrent use. Close it when done: it owns one connection (or,
// on the plain path, one flusher) per master.
type Locker struct {
	masters []redis.UniversalClient
	addrs   []string
	opts    Options
	budget  validity.Budget
	need    int
	streams []*stream
	log     *slog.Logger
	tel     *telemetry

	mu      sync.Mutex
	closing bool
	ops     sync.WaitGroup // operations in progress; Close waits for them
	runIDs  map[string]int // server run_id → master index
	invalid error          // two masters turned out to be one server
	tried   atomic.Int32   // streams whose first dial has ended

	// betweenRounds, when set by tests (export_test.go), runs between the
	// two rounds of a fenced acquisition.
	betweenRounds func()
}

// New returns a Locker over masters, which must be independent Redis
// masters (not replicas of each other, not one server under two names):
// the guarantee rests on a majority of them agreeing. The clients are the
// caller's; Close does not close them. A nil opts means all defaults. New
// reports the first rule the arguments break, as an error wrapping
// ErrInvalid. It does not contact the masters: each is identified by its
// run_id on first contact, and two masters that turn out to be one server
// make every operation fail with ErrInvalid.
//
// Plain *redis.Client masters get the fast path: one dedicated, pipelined
// connection per master, opened with the client's address, dialer, TLS
// config, user, password and DB, but not through its pool or hooks. Other
// clients (cluster, Sentinel failover, ring, or a client with a
// credentials provider or an OnConnect hook), and every client when
// Options.ViaClient is set, get the plain path: batches sent as go-redis
// pipelines through the client itself.
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
		// The same address string reaches the same server, unless a
		// dialer of the caller's decides otherwise; other names for one
		// server are caught by run_id on first contact.
		if c, ok := m.(*redis.Client); ok && c.Options().Addr != "FailoverClient" {
			ids = append(ids, addrs[i])
		}
		for _, id := range ids {
			if j, dup := seen[id]; dup {
				return nil, invalid(fmt.Sprintf("masters %d and %d are the same master (%s): a quorum needs independent masters", j, i, id))
			}
			seen[id] = i
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Locker{
		masters: append([]redis.UniversalClient(nil), masters...),
		addrs:   addrs,
		opts:    o,
		budget:  o.budget(),
		need:    validity.Majority(len(masters)),
		log:     log,
		runIDs:  map[string]int{},
	}
	l.streams = make([]*stream, len(masters))
	for i, m := range l.masters {
		var dial func() (link, string, error)
		var giveUp time.Duration
		if fo := fastOptions(m); fo != nil && !o.ViaClient {
			dial = func() (link, string, error) { return l.streams[i].dialRESP(fo) }
			// go-redis: 0 means 3s, −1 and −2 no timeout.
			switch rt := fo.ReadTimeout; {
			case rt == 0:
				giveUp = 3 * time.Second
			case rt > 0:
				giveUp = max(rt, o.NodeTimeout)
			}
		} else {
			dial = func() (link, string, error) { return l.streams[i].dialPlain(m) }
		}
		l.streams[i] = newStream(l, i, dial, giveUp)
	}
	tel, err := newTelemetry(l)
	if err != nil {
		for _, s := range l.streams {
			s.close()
		}
		return nil, fmt.Errorf("redlock: creating metrics: %w", err)
	}
	l.tel = tel
	return l, nil
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// clientAddr names a master in NodeResult and errors.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return strings.ToLower(c.Options().Addr)
	case *redis.ClusterClient:
		return strings.ToLower(strings.Join(c.Options().Addrs, ","))
	}
	return ""
}

// identify records master i's server run_id, and fails when another
// master is the same server.
func (l *Locker) identify(i int, runID string) error {
	if runID == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if j, ok := l.runIDs[runID]; ok && j != i {
		err := invalid(fmt.Sprintf("masters %d and %d are the same server (run_id %s): a quorum needs independent masters", min(i, j), max(i, j), runID))
		if l.invalid == nil {
			l.invalid = err
		}
		return err
	}
	l.runIDs[runID] = i
	return nil
}

// enter registers an operation, unless the Locker is closing.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.ops.Add(1)
	return true
}

func (l *Locker) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

func (l *Locker) invalidErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.invalid
}

// Options returns the options in force, defaults filled in.
func (l *Locker) Options() Options { return l.opts }

// Stats returns what the Locker knows about each master, by index.
func (l *Locker) Stats() []StreamStats {
	out := make([]StreamStats, len(l.streams))
	for i, s := range l.streams {
		out[i] = s.stats()
	}
	return out
}

// Close makes new operations fail with ErrClosed, waits for the ones in
// progress (each round is bounded by NodeTimeout; an acquisition caught
// between its two fenced rounds fails and releases what it took), then
// closes the connections. Locks already handed out can no longer be
// extended or released through this Locker: Extend and Unlock return an
// error wrapping ErrClosed, and the keys stay until their TTL. Releases
// still waiting for a stalled master are dropped: those keys too expire
// with their TTL. On the plain path Close also waits for a batch stuck on
// a stalled master, up to the client's ReadTimeout. Close is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.ops.Wait()
	for _, s := range l.streams {
		s.close()
	}
	l.tel.close()
	return nil
}

// TryLock makes one acquisition round for resource: it asks every master at
// once and returns as soon as a majority granted the lock with validity
// left, or as soon as that became impossible. On failure every master is
// released before TryLock returns, and the error wraps ErrNotAcquired (and
// ctx's error if ctx ended first); errors.As gives an *Error with the
// outcome on each master.
func (l *Locker) TryLock(ctx context.Context, resource string) (*Lock, error) {
	if err := l.opts.checkName(resource); err != nil {
		return nil, err
	}
	ctx, span := l.tel.start(ctx, "TryLock", resource)
	lk, err := l.acquire(ctx, resource)
	end(span, err)
	return lk, err
}

// Lock acquires resource, retrying failed rounds with jittered exponential
// backoff (Options.Retry) until it succeeds, ctx ends, or the policy's
// MaxAttempts is spent. When ctx ends, the error satisfies
// errors.Is(err, ctx.Err()). An attempt refused for lack of permission
// (errors.Is(err, ErrInvalid)) is not retried.
func (l *Locker) Lock(ctx context.Context, resource string) (lk *Lock, err error) {
	if err := l.opts.checkName(resource); err != nil {
		return nil, err
	}
	ctx, span := l.tel.start(ctx, "Lock", resource)
	attempt := 0
	defer func() {
		l.tel.lockAttempts(ctx, attempt, resource)
		end(span, err)
	}()
	var timer *time.Timer
	for attempt = 1; ; attempt++ {
		lk, err = l.acquire(ctx, resource)
		// A master refusing the Locker's commands (its ACL) is ErrInvalid
		// too: retrying cannot fix it.
		if err == nil || !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalid) {
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
	if !l.enter() {
		return nil, closedError("acquire", resource)
	}
	defer l.ops.Done()
	if err := l.invalidErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "acquire", Resource: resource, Need: l.need, Nodes: l.untried(), kind: ErrNotAcquired, cause: context.Cause(ctx)}
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	key := l.opts.keyFor(resource)
	ttl := uint64(l.opts.TTL.Milliseconds())
	kind := cmdSetNX
	if l.opts.Fencing {
		kind = cmdAcquireFenced
	}
	start := time.Now()
	res := l.round(ctx, start, false, func(c *cmd) bool {
		c.kind, c.key, c.token, c.n = kind, key, token, ttl
		return true
	})
	// The masters where our SET may be: asked, and not refused.
	mayHold := make([]bool, len(res.Replies))
	for i, r := range res.Replies {
		mayHold[i] = r.Outcome != quorum.Unavailable && r.Outcome != quorum.Refused
	}
	l.tel.round(ctx, l, "acquire", res)
	info := Acquisition{
		Start: start, TTL: l.opts.TTL, Drift: l.budget.Drift(), SafetyMargin: l.opts.SafetyMargin,
		Nodes: l.nodeResults(res),
	}
	// settle decides a round: nil to go on, or the error after releasing
	// every master that may hold the key.
	settle := func(op string, res quorum.Result, reason string) error {
		info.Elapsed = time.Since(start)
		info.Validity = l.budget.Validity(info.Elapsed)
		inv := l.invalidErr()
		if reason == "" && inv == nil && res.Err == nil && res.Reached && info.Validity > 0 {
			return nil
		}
		l.release(ctx, resource, key, token, mayHold)
		e := &Error{Op: op, Resource: resource, Need: l.need, Nodes: info.Nodes, Reason: reason, kind: ErrNotAcquired}
		// A master that refused the command for lack of permission is
		// named, and makes the error ErrInvalid too.
		e.cause = refusal(info.Nodes)
		outcome := outNoQuorum
		switch {
		case inv != nil:
			l.tel.acquired(ctx, resource, outNoQuorum, info, 0)
			return inv
		case reason == closedReason:
			e.kind, outcome = ErrClosed, outClosed
		case res.Err != nil:
			e.cause, outcome = context.Cause(ctx), outCanceled
		case res.Reached && reason == "":
			e.Reason, outcome = fmt.Sprintf("majority arrived after %v, past the validity window %v", info.Elapsed, l.budget.Window()), outExpired
		case res.Count(quorum.Refused) > 0:
			outcome = outHeld
		}
		l.tel.acquired(ctx, resource, outcome, info, 0)
		l.log.DebugContext(ctx, "redlock: acquire failed", "resource", resource, "token", shortToken(token), "err", e)
		return e
	}
	if err := settle("acquire", res, ""); err != nil {
		return nil, err
	}
	var fence uint64
	if l.opts.Fencing {
		// The fence is one more than the largest counter the majority
		// read, written back to a majority that still holds our token
		// before the deadline (docs/design.md §5).
		reason := ""
		for _, r := range res.Replies {
			if r.Outcome == quorum.OK {
				if r.Value == math.MaxUint64 {
					reason = "the fence counter is exhausted (2^64−1): no larger fence can be issued"
				}
				fence = max(fence, r.Value+1)
			}
		}
		if l.betweenRounds != nil {
			l.betweenRounds()
		}
		if reason == "" && l.isClosing() {
			reason = closedReason
		}
		if reason != "" {
			return nil, settle("fence", res, reason)
		}
		wres := l.round(ctx, time.Now(), false, func(c *cmd) bool {
			c.kind, c.key, c.token, c.n = cmdWriteback, key, token, fence
			return true
		})
		l.tel.round(ctx, l, "fence", wres)
		info.Nodes = l.nodeResults(wres)
		if err := settle("fence", wres, ""); err != nil {
			return nil, err
		}
	}
	lk := &Lock{locker: l, resource: resource, key: key, token: token, fence: fence, mayHold: mayHold, deadline: l.budget.Deadline(start), info: info}
	l.tel.acquired(ctx, resource, outAcquired, info, fence)
	l.log.DebugContext(ctx, "redlock: acquired", "resource", resource, "token", shortToken(token), "fence", fence, "elapsed", info.Elapsed, "validity", info.Validity)
	return lk, nil
}

// closedReason marks an acquisition that found the Locker closing between
// its rounds.
const closedReason = "the Locker was closed during the acquisition"

func closedError(op, resource string) error {
	return &Error{Op: op, Resource: resource, kind: ErrClosed}
}

// round sends one command to each master (fill sets it up; false skips
// the master) and waits for the decision: a majority, or with waitAll
// every master, each within NodeTimeout of start. A master that is not
// answering is not sent anything (Unavailable); a release for it is
// deferred until it answers again. Until every master has been dialled
// once, a round waits for all of them, so that two masters that turn out
// to be one server (run_id, on first contact) fail it with ErrInvalid
// rather than after it.
func (l *Locker) round(ctx context.Context, start time.Time, waitAll bool, fill func(c *cmd) bool) quorum.Result {
	n := len(l.streams)
	waitAll = waitAll || int(l.tried.Load()) < n
	r, _ := quorum.NewRound(n, l.need, waitAll, start)
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
	return r.Wait(ctx, l.opts.NodeTimeout)
}

func (l *Locker) untried() []NodeResult {
	nodes := make([]NodeResult, len(l.masters))
	for i := range nodes {
		nodes[i] = NodeResult{Addr: l.addrs[i], Outcome: quorum.Canceled}
	}
	return nodes
}

func (l *Locker) nodeResults(res quorum.Result) []NodeResult {
	nodes := make([]NodeResult, len(res.Replies))
	for i, r := range res.Replies {
		nodes[i] = NodeResult{Addr: l.addrs[i], Outcome: r.Outcome, Latency: r.Latency, Err: r.Err}
		if r.Outcome == quorum.Refused {
			nodes[i].Err = nil
		}
	}
	return nodes
}

// release deletes token's key on every master where it may be (mayHold),
// and waits for each to answer or reach NodeTimeout, whatever ctx says: a
// cancelled caller must still not leave keys behind. On each master the
// release follows the SET it cleans up on the same ordered stream, so it
// can never run first. A master counts as OK when the key is
// gone afterwards (deleted now, or already absent) and as Refused when
// another owner's token is there. A master that is not answering gets the
// release when it answers again; one that does not answer in time gets it
// from the stream all the same.
func (l *Locker) release(ctx context.Context, resource, key, token string, mayHold []bool) quorum.Result {
	res := l.round(context.WithoutCancel(ctx), time.Now(), true, func(c *cmd) bool {
		c.kind, c.key, c.token = cmdRelease, key, token
		return mayHold[c.node]
	})
	l.tel.round(ctx, l, "release", res)
	l.tel.released(ctx, resource, res, l.need)
	return res
}

var (
	// errSkipped marks a master the release round had nothing to send to:
	// the lock's SET was never sent there, or was refused.
	errSkipped = errors.New("redlock: nothing to release here (the acquire was never sent, or refused)")
	// errDeferred marks a release held back until its master answers.
	errDeferred = errors.New("redlock: release deferred until the master answers again")
)
