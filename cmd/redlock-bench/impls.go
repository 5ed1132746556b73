package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// impl is one lock implementation opened on the bench's masters. lock is
// called from many goroutines at once.
type impl interface {
	lock(ctx context.Context, resource string) (held, error)
	close() error
}

// held is one acquired lock; it is used by one goroutine.
type held interface {
	unlock(ctx context.Context) error
	validity() validitySample
}

// validitySample is what was left of the TTL at acquisition and why.
type validitySample struct {
	left, elapsed, drift, margin time.Duration
}

// implSpec names an implementation and opens it on a set of masters, each
// time with new default-option go-redis clients (what users get).
type implSpec struct {
	name   string
	desc   string
	source string // Validity.Source
	// open gets each master's client options (address; from -addrs URLs
	// also TLS, user and password), which it must not modify.
	open func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error)
	// openIn, when set, opens the implementation instead of open, given
	// the cell and the run's environment: for implementations on servers
	// of their own (etcd, etcd.go), whose cells read no Redis master
	// stats (commands, PING, the masters' CPU) but their servers' CPU.
	openIn func(c cell, env cellEnv) (impl, error)
	hidden bool // only run when a scenario names it
	// optIn: runs only when -impls names it (the other Go clients and
	// locks, clients.go), so the default run and "all" stay as they were.
	optIn bool
}

// keyPrefix is every key the bench writes: "rlbench:{<run>/<cell>/...}".
const keyPrefix = "rlbench:"

var impls = append([]implSpec{
	{
		name: "redlock", source: "acquisition",
		desc: "this module: redlock.New(clients, &Options{TTL: -ttl}), one Locker shared by all workers",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openOurs(ms, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix})
		},
	},
	{
		name: "redsync", source: "until",
		desc: "go-redsync/redsync/v4 defaults (goredis/v9 pools), WithExpiry(-ttl); a new Mutex per op",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openRedsync(ms, ttl), nil
		},
	},
	{
		name: "redsync-failfast", source: "until",
		desc: "redsync as above plus WithFailFast(true): returns once a quorum answered",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openRedsync(ms, ttl, redsync.WithFailFast(true)), nil
		},
	},
	{
		name: "single", source: "computed",
		desc: "SET NX PX on master 0 + compare-and-del: the no-quorum floor (retries like ours)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return &single{c: newMasterClient(ms[0]), ttl: ttl, del: redis.NewScript(compareAndDel)}, nil
		},
	},
	{
		name: "redlock-off", source: "acquisition", hidden: true,
		desc: "this module with its instrumentation off (no-op providers passed; telemetry scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openOurs(ms, tel.options("off", redlock.Options{TTL: ttl, KeyPrefix: keyPrefix}))
		},
	},
	{
		name: "redlock-otel", source: "acquisition", hidden: true,
		desc: "this module reporting metrics to the OpenTelemetry SDK, read by a Prometheus reader (-metrics-addr serves it); no tracing (telemetry scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openOurs(ms, tel.options("sdk", redlock.Options{TTL: ttl, KeyPrefix: keyPrefix}))
		},
	},
	{
		name: "redlock-otel-traces", source: "acquisition", hidden: true,
		desc: "redlock-otel, and spans to the tracing SDK with 1% of traces sampled into an exporter that discards them (telemetry scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openOurs(ms, tel.options("sdk-traces", redlock.Options{TTL: ttl, KeyPrefix: keyPrefix}))
		},
	},
	{
		name: "redlock-fenced", source: "acquisition", hidden: true,
		desc: "this module with Options.Fencing (fencing scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			return openOurs(ms, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix, Fencing: true})
		},
	},
}, slices.Concat(clientImpls, primitiveImpls, etcdImpls)...) // clients.go, primitives.go, etcd.go

// implNames are the implementations -impls selects by default and with
// "all".
func implNames() []string {
	var out []string
	for _, s := range impls {
		if !s.hidden && !s.optIn {
			out = append(out, s.name)
		}
	}
	return out
}

// optInImplNames are the implementations -impls runs only when named.
func optInImplNames() []string {
	var out []string
	for _, s := range impls {
		if s.optIn {
			out = append(out, s.name)
		}
	}
	return out
}

func implByName(name string) implSpec {
	for _, s := range impls {
		if s.name == name {
			return s
		}
	}
	panic("redlock-bench: unknown implementation " + name) // validated by parseFlags
}

func describeImpls() string {
	var b strings.Builder
	for _, s := range impls {
		if !s.hidden {
			desc := s.desc
			if s.optIn {
				desc += " (only when named)"
			}
			fmt.Fprintf(&b, "  %-17s %s\n", s.name, desc)
		}
	}
	return b.String()
}

// newClients returns a new client for each master's options (copied:
// go-redis fills in defaults in the options it is given).
func newClients(ms []*redis.Options) []*redis.Client {
	out := make([]*redis.Client, len(ms))
	for i, o := range ms {
		c := *o
		out[i] = redis.NewClient(&c)
	}
	return out
}

func closeClients(cs []*redis.Client) error {
	var errs []error
	for _, c := range cs {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ---- ours ----

type ours struct {
	l       *redlock.Locker
	clients []redis.UniversalClient
}

func openOurs(ms []*redis.Options, o redlock.Options) (*ours, error) {
	cs := newMasterClients(ms)
	l, err := redlock.New(cs, &o)
	if err != nil {
		return nil, errors.Join(err, closeMasterClients(cs))
	}
	return &ours{l: l, clients: cs}, nil
}

func (o *ours) lock(ctx context.Context, resource string) (held, error) {
	lk, err := o.l.Lock(ctx, resource)
	if err != nil {
		return nil, err
	}
	return oursHeld{lk}, nil
}

// close waits for calls still out to masters (Locker.Close) before closing
// the clients under them.
func (o *ours) close() error { return errors.Join(o.l.Close(), closeMasterClients(o.clients)) }

type oursHeld struct{ lk *redlock.Lock }

func (h oursHeld) unlock(ctx context.Context) error { return h.lk.Unlock(ctx) }

func (h oursHeld) validity() validitySample {
	a := h.lk.Acquisition()
	return validitySample{left: a.Validity, elapsed: a.Elapsed, drift: a.Drift, margin: a.SafetyMargin}
}

// ---- redsync ----

// redsyncDriftFactor is redsync's default (NewMutex: driftFactor 0.01); it
// adds no constant.
const redsyncDriftFactor = 0.01

type redsyncImpl struct {
	rs      *redsync.Redsync
	opts    []redsync.Option
	clients []redis.UniversalClient
	closers []func() // clients of other kinds
	ttl     time.Duration
	// inflight, when set, counts the commands redsync has out, for close
	// to wait for.
	inflight *redsyncInflight
}

func openRedsync(ms []*redis.Options, ttl time.Duration, opts ...redsync.Option) *redsyncImpl {
	cs := newMasterClients(ms)
	pools := make([]redsyncredis.Pool, len(cs))
	for i, c := range cs {
		pools[i] = goredis.NewPool(c)
	}
	f := &redsyncInflight{}
	return &redsyncImpl{rs: redsync.New(f.countPools(pools)...), opts: append(opts, redsync.WithExpiry(ttl)), clients: cs, ttl: ttl, inflight: f}
}

func (r *redsyncImpl) lock(ctx context.Context, resource string) (held, error) {
	// A Mutex holds its own token and deadline and is not safe for
	// concurrent use: one per operation.
	m := r.rs.NewMutex(keyPrefix+"{"+resource+"}", r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return &redsyncHeld{m: m, ttl: r.ttl, left: time.Until(m.Until())}, nil
}

// close waits for redsync's commands still in flight, then closes the
// clients. With WithFailFast, Lock and Unlock return once a quorum has
// answered and leave the other masters' commands running in redsync's
// goroutines; a client closed under one whose reply was just read makes
// go-redis log "Unexpected conn[N] state changed by hook to CLOSED,
// closing it" (its pool's putConn finds the connection closed by
// ConnPool.Close) on the bench's stderr.
func (r *redsyncImpl) close() error {
	if r.inflight != nil {
		r.inflight.drain(drainBound)
	}
	for _, f := range r.closers {
		f()
	}
	return closeMasterClients(r.clients)
}

// redsyncInflight counts redsync's commands in flight through the pools
// countPools wraps: redsync takes a Conn (Pool.Get) for each command to a
// master and closes it once the reply is in.
type redsyncInflight struct {
	n       atomic.Int64
	closing atomic.Bool
}

var errRedsyncClosing = errors.New("redsync implementation closing")

// countPools wraps pools so that f counts their commands.
func (f *redsyncInflight) countPools(pools []redsyncredis.Pool) []redsyncredis.Pool {
	out := make([]redsyncredis.Pool, len(pools))
	for i, p := range pools {
		out[i] = countedPool{p, f}
	}
	return out
}

// drain refuses new commands and waits, at most bound, for those in
// flight. A command counts itself before it looks at closing, and drain
// sets closing before it reads the count, so no command starts unseen.
func (f *redsyncInflight) drain(bound time.Duration) {
	f.closing.Store(true)
	for deadline := time.Now().Add(bound); f.n.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

type countedPool struct {
	redsyncredis.Pool
	f *redsyncInflight
}

func (p countedPool) Get(ctx context.Context) (redsyncredis.Conn, error) {
	p.f.n.Add(1)
	if p.f.closing.Load() {
		p.f.n.Add(-1)
		return nil, errRedsyncClosing
	}
	c, err := p.Pool.Get(ctx)
	if err != nil {
		p.f.n.Add(-1)
		return nil, err
	}
	return countedConn{c, p.f}, nil
}

// countedConn is one command's Conn; redsync closes each once (deferred
// right after Get).
type countedConn struct {
	redsyncredis.Conn
	f *redsyncInflight
}

func (c countedConn) Close() error {
	err := c.Conn.Close()
	c.f.n.Add(-1)
	return err
}

type redsyncHeld struct {
	m         *redsync.Mutex
	ttl, left time.Duration
}

var errNoQuorumUnlock = errors.New("unlock reached no quorum")

func (h *redsyncHeld) unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if !ok {
		return errors.Join(errNoQuorumUnlock, err)
	}
	return nil
}

func (h *redsyncHeld) validity() validitySample {
	// Until() = decision + expiry − elapsed − expiry×driftFactor, where
	// elapsed is its last round's; with left read right after Lock
	// returned, elapsed here also counts the return to the caller.
	drift := time.Duration(float64(h.ttl) * redsyncDriftFactor)
	return validitySample{left: h.left, elapsed: h.ttl - drift - h.left, drift: drift}
}

// ---- single ----

const compareAndDel = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

// single is one master, no quorum: what a lock costs without Redlock.
type single struct {
	c   redis.UniversalClient
	ttl time.Duration
	del *redis.Script
}

var errSingleLost = errors.New("single: key no longer held")

func (s *single) lock(ctx context.Context, resource string) (held, error) {
	key := keyPrefix + "{" + resource + "}"
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	token := base64.RawURLEncoding.EncodeToString(b[:])
	const minDelay, maxDelay = 5 * time.Millisecond, 100 * time.Millisecond // ours' default Retry
	for attempt := 1; ; attempt++ {
		start := time.Now()
		ok, err := s.c.SetNX(ctx, key, token, s.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			el := time.Since(start)
			return &singleHeld{s: s, key: key, token: token, elapsed: el, left: s.ttl - el}, nil
		}
		d := min(minDelay<<min(attempt-1, 16), maxDelay)
		t := time.NewTimer(d/2 + mrand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (s *single) close() error { return closeMasterClients([]redis.UniversalClient{s.c}) }

type singleHeld struct {
	s             *single
	key, token    string
	elapsed, left time.Duration
}

func (h *singleHeld) unlock(ctx context.Context) error {
	n, err := h.s.del.Run(ctx, h.s.c, []string{h.key}, h.token).Int64()
	if err != nil {
		return err
	}
	if n == 0 {
		return errSingleLost
	}
	return nil
}

func (h *singleHeld) validity() validitySample {
	return validitySample{left: h.left, elapsed: h.elapsed}
}

// failureKind names an error for the failure counts.
func failureKind(err error) string {
	var taken *redsync.ErrTaken
	var netErr net.Error
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		return "not_acquired"
	case errors.Is(err, redlock.ErrLost), errors.Is(err, errSingleLost), errors.Is(err, errNoQuorumUnlock), errors.Is(err, errBsmLost),
		errors.Is(err, errEtcdSessionLost):
		return "lost"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.As(err, &taken), errors.Is(err, errEtcdLocked):
		return "taken"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "ctx"
	case errors.As(err, &netErr) && netErr.Timeout(), errors.Is(err, errEtcdTimeout):
		return "timeout"
	case errors.Is(err, redsync.ErrFailed):
		return "failed"
	case errors.Is(err, redsync.ErrLockAlreadyExpired):
		return "expired"
	}
	return "error"
}
