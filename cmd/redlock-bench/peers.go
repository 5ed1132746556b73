//go:build peers

package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	"github.com/redis/rueidis/rueidislock"
	"github.com/valkey-io/valkey-go"

	redlockredigo "github.com/quorumlab/redlock/adapters/redigo"
	redlockrueidis "github.com/quorumlab/redlock/adapters/rueidis"
	redlockvalkey "github.com/quorumlab/redlock/adapters/valkey"
	"github.com/quorumlab/redlock/driver"
)

// peersBuilt: the implementations of peerNames are in this build
// (extras.go).
const peersBuilt = true

// peerImpls are ours through rueidis, valkey-go and redigo, and redsync
// over rueidis, rueidislock and bsm/redislock (clientImpls).
var peerImpls = []implSpec{
	{
		optIn: true,
		name:  "redlock-rueidis", source: "acquisition",
		desc: "this module through rueidis clients (adapters/rueidis Master): the client path, rueidis pipelining",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openOursOn(ms, ttl, func(o *redis.Options, _ int) (driver.Master, func(), error) {
				c, err := rueidis.NewClient(rueidisOption(o))
				if err != nil {
					return nil, nil, err
				}
				m, err := redlockrueidis.Master(c)
				return m, c.Close, err
			})
		},
	},
	{
		optIn: true,
		name:  "redlock-valkey", source: "acquisition",
		desc: "this module through valkey-go clients (adapters/valkey Master): the client path, valkey-go pipelining",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openOursOn(ms, ttl, func(o *redis.Options, _ int) (driver.Master, func(), error) {
				c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{o.Addr}, Username: o.Username,
					Password: o.Password, TLSConfig: o.TLSConfig, SelectDB: o.DB, DisableCache: true})
				if err != nil {
					return nil, nil, err
				}
				m, err := redlockvalkey.Master(c)
				return m, c.Close, err
			})
		},
	},
	{
		optIn: true,
		name:  "redlock-redigo", source: "acquisition",
		desc: "this module through redigo pools (adapters/redigo Master): the client path, one pooled connection per batch",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openOursOn(ms, ttl, func(o *redis.Options, _ int) (driver.Master, func(), error) {
				p := &redigo.Pool{MaxIdle: 16, Dial: func() (redigo.Conn, error) {
					return redigo.Dial("tcp", o.Addr, redigo.DialUseTLS(o.TLSConfig != nil), redigo.DialTLSConfig(o.TLSConfig),
						redigo.DialUsername(o.Username), redigo.DialPassword(o.Password), redigo.DialDatabase(o.DB))
				}}
				m, err := redlockredigo.Master(p, o.Addr)
				return m, func() { p.Close() }, err
			})
		},
	},
	{
		optIn: true,
		name:  "redsync-rueidis", source: "until",
		desc: "redsync over rueidis (rueidiscompat pools), WithFailFast(true), WithExpiry(-ttl); five independent masters",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			pools := make([]redsyncredis.Pool, len(ms))
			var closers []func()
			for i, o := range ms {
				c, err := rueidis.NewClient(rueidisOption(o))
				if err != nil {
					for _, f := range closers {
						f()
					}
					return nil, err
				}
				closers = append(closers, c.Close)
				pools[i] = redsyncrueidis.NewPool(rueidiscompat.NewAdapter(c))
			}
			return &redsyncImpl{rs: redsync.New(pools...), opts: []redsync.Option{redsync.WithFailFast(true), redsync.WithExpiry(ttl)},
				ttl: ttl, closers: closers}, nil
		},
	},
	{
		optIn: true,
		name:  "rueidislock", source: "computed",
		desc: "rueidis/rueidislock defaults (KeyMajority 2 of 3 keys), all keys on master 0: ONE deployment, not independent masters",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openRueidislock(ms[0], ttl, 0)
		},
	},
	{
		optIn: true,
		name:  "rueidislock-km1", source: "computed",
		desc: "rueidislock with KeyMajority 1 (one key) on master 0: ONE master",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openRueidislock(ms[0], ttl, 1)
		},
	},
	{
		optIn: true,
		name:  "redislock", source: "computed",
		desc: "bsm/redislock on master 0 (go-redis), retried like ours (5-100 ms): ONE master",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			c := newMasterClient(ms[0])
			return &bsmLock{c: c, l: redislock.New(c), ttl: ttl}, nil
		},
	},
}

func rueidisOption(o *redis.Options) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{o.Addr}, Username: o.Username, Password: o.Password,
		TLSConfig: o.TLSConfig, SelectDB: o.DB, DisableCache: true}
}

// ---- rueidislock ----

type rueidisLock struct {
	l   rueidislock.Locker
	ttl time.Duration
}

// openRueidislock opens rueidislock on one master; km 0 is its default
// KeyMajority (2). Its KeyValidity is -ttl.
func openRueidislock(o *redis.Options, ttl time.Duration, km int32) (impl, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: rueidisOption(o), KeyMajority: km,
		KeyValidity: ttl, KeyPrefix: keyPrefix})
	if err != nil {
		return nil, err
	}
	return &rueidisLock{l: l, ttl: ttl}, nil
}

func (r *rueidisLock) lock(ctx context.Context, resource string) (held, error) {
	start := time.Now()
	_, cancel, err := r.l.WithContext(ctx, "{"+resource+"}")
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	return &funcHeld{release: func(context.Context) error { cancel(); return nil }, v: validitySample{left: r.ttl - el, elapsed: el}}, nil
}

func (r *rueidisLock) close() error { r.l.Close(); return nil }

// ---- bsm/redislock ----

type bsmLock struct {
	c   redis.UniversalClient
	l   *redislock.Client
	ttl time.Duration
}

func (b *bsmLock) lock(ctx context.Context, resource string) (held, error) {
	start := time.Now()
	// Retried until ctx ends, with ours' default backoff.
	lk, err := b.l.Obtain(ctx, keyPrefix+"{"+resource+"}", b.ttl, &redislock.Options{
		RetryStrategy: redislock.ExponentialBackoff(5*time.Millisecond, 100*time.Millisecond)})
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	return &funcHeld{release: func(ctx context.Context) error {
		if err := lk.Release(ctx); errors.Is(err, redislock.ErrLockNotHeld) {
			return errBsmLost
		} else {
			return err
		}
	}, v: validitySample{left: b.ttl - el, elapsed: el}}, nil
}

func (b *bsmLock) close() error { return closeMasterClients([]redis.UniversalClient{b.c}) }
