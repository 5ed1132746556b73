package redlock

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/validity"
)

// The Locker's constructors: New over go-redis clients, NewFromURLs over
// addresses, NewMasters over any client (package driver), and newLocker
// beneath them, which checks the options and the masters and builds each
// master's path, the waker and the telemetry.

// New returns a Locker over masters, which must be independent Redis masters
// (not replicas of each other, not one server under two names): the
// guarantee rests on a majority of them agreeing. The clients stay the
// caller's. A nil opts means all defaults. New reports the first rule the
// arguments break as ErrInvalid, including one server under two addresses
// it can recognise; it contacts nothing, and two masters that turn out to be
// one server (same run_id) make every operation fail with ErrInvalid. Fewer
// than 3 masters, or an even number, are accepted with a warning.
//
// A *redis.Client gets the fast path (one dedicated pipelined connection
// with the client's options), a *redis.ClusterClient one per shard; other
// clients, and all with Options.ViaClient, send pipelines through the
// client itself (docs/design.md §10).
func New(masters []redis.UniversalClient, opts *Options) (*Locker, error) {
	ms := make([]driver.Master, len(masters))
	for i, m := range masters {
		if m != nil && !isNilPointer(m) {
			ms[i] = &goRedisMaster{c: m}
		}
	}
	return NewMasters(ms, opts)
}

// NewMasters is New over masters of any client (package driver): go-redis
// clients (driver.GoRedis) take the paths New gives them, the others (the
// adapters under adapters/) the client path, through the client's own
// pipelining. The clients of driver.GoRedis are the Locker's: Close closes
// them, also when NewMasters fails; the others are the caller's.
func NewMasters(masters []driver.Master, opts *Options) (*Locker, error) {
	l, err := newLocker(masters, opts, sysEnv{}, nil)
	if err != nil {
		closeOwned(masters)
	}
	return l, err
}

// newLocker makes a Locker that lives in e; path, when not nil, makes
// each master's path instead of the one its client calls for (the
// simulator's).
func newLocker(masters []driver.Master, opts *Options, e env, path func(cfg *pathConfig) pathway) (*Locker, error) {
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
	clients := make([]redis.UniversalClient, len(masters)) // nil on the client path
	seen := map[string]int{}
	for i, m := range masters {
		if m == nil || isNilPointer(m) {
			return nil, invalid(fmt.Sprintf("master %d is a nil client", i))
		}
		ids := []string{fmt.Sprintf("%p", m)}
		if g, ok := m.(goRedisClient); ok {
			c := g.GoRedisClient()
			if c == nil || isNilPointer(c) {
				return nil, invalid(fmt.Sprintf("master %d is a nil client", i))
			}
			clients[i] = c
			ids[0] = fmt.Sprintf("%p", c)
		}
		addrs[i] = masterAddr(m)
		// The same address reaches the same server, unless a dialer of
		// the caller's decides otherwise; names New cannot see are one
		// (serverName) are caught by run_id on first contact.
		if c, ok := clients[i].(*redis.Client); (ok && !isFailover(c)) || (clients[i] == nil && addrs[i] != "") {
			ids = append(ids, serverName(addrs[i]))
		}
		for k, id := range ids {
			if j, dup := seen[id]; dup {
				if k > 0 {
					id = addrs[j]
					if addrs[i] != addrs[j] {
						id += " and " + addrs[i]
					}
				}
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
		masters: clients,
		given:   masters,
		addrs:   addrs,
		opts:    o,
		budget:  o.budget(),
		need:    validity.Majority(len(masters)),
		log:     log,
		env:     e,
		pace:    pace{masters: make([]roundTimes, len(masters))},
	}
	l.ids.addrs = addrs
	l.keeper.env = e
	l.quit, l.endQuit = context.WithCancel(context.Background())
	l.keeper.quit = l.quit
	l.wake = newWaker(l.env, l.masters, l.given, l.need)
	l.streams = make([]pathway, len(masters))
	for i, m := range l.masters {
		cfg := newPathConfig(l, i, e)
		switch {
		case path != nil:
			l.streams[i] = path(cfg)
		case m != nil:
			l.streams[i] = newPath(cfg, m, o.ViaClient) // transport.go
		default:
			l.streams[i] = newClientPath(cfg, masters[i]) // transport.go
		}
	}
	tel, err := newTelemetry(l)
	if err != nil {
		for _, s := range l.streams {
			s.close()
		}
		l.endQuit()
		return nil, fmt.Errorf("redlock: creating metrics: %w", err)
	}
	l.tel = tel
	l.warnMasterCount()
	return l, nil
}

// warnMasterCount logs, once per Locker, what fewer than 3 masters or an
// even number of them tolerate: a majority of N survives N − Majority(N)
// failed masters, and N+1 masters, for an even N, no more than N−1 do.
func (l *Locker) warnMasterCount() {
	n := len(l.masters)
	if n >= 3 && n%2 == 1 {
		return
	}
	f := n - l.need
	var msg string
	switch {
	case f == 0:
		msg = fmt.Sprintf("redlock: %d master(s) tolerate no master failing or stalling (a majority is all %d); use an odd number, at least 3", n, n)
	default:
		msg = fmt.Sprintf("redlock: %d masters tolerate %d master(s) failing, as %d do; an odd number gives the same tolerance with fewer masters", n, f, n-1)
	}
	l.log.WarnContext(context.Background(), msg, "masters", n, "majority", l.need, "tolerates", f)
}

// NewFromURLs is New over the masters at redis:// or rediss:// urls (user,
// password, DB and TLS as in the URL; the query parameters of go-redis's
// ParseURL): the Locker makes a client for each, every master on the
// fast path, and Close closes them. An unparsable URL is ErrInvalid.
func NewFromURLs(urls []string, opts *Options) (*Locker, error) {
	ms := make([]driver.Master, len(urls))
	for i, u := range urls {
		o, err := redis.ParseURL(u)
		if err != nil {
			closeOwned(ms[:i])
			return nil, fmt.Errorf("redlock: master %d: %w: %w", i, ErrInvalid, err)
		}
		ms[i] = driver.GoRedis(o)
	}
	l, err := NewMasters(ms, opts)
	if err != nil {
		closeOwned(ms)
	}
	return l, err
}

// newPathConfig is master i's pathConfig in l, which lives in e.
func newPathConfig(l *Locker, i int, e env) *pathConfig {
	return &pathConfig{Master: i, Addr: l.addrs[i], NodeTimeout: l.opts.MasterTimeout, Log: l.log, IDs: &l.ids, Tried: &l.tried, Rounds: &l.rounds,
		Env: wireEnv{e}, Proto: wireProtocol}
}
