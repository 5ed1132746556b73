package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// The implementations over other Go clients (issue 22): ours on each client
// path, and the other Go locks a user choosing for speed would try. Each
// desc says what its guarantee rests on. They run only when -impls names
// them. Those on go-redis are here; those on other clients, and the other
// locks, are peerImpls (peers.go, build tag peers; extras.go).
var clientImpls = append([]implSpec{
	{
		optIn: true,
		name:  "redlock-url", source: "acquisition",
		desc: "this module from the masters' URLs (driver.GoRedis, no client of the caller's): the fast path",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openOursOn(ms, ttl, func(o *redis.Options, _ int) (driver.Master, func(), error) {
				c := *o
				return driver.GoRedis(&c), func() {}, nil
			})
		},
	},
	{
		optIn: true,
		name:  "redlock-viaclient", source: "acquisition",
		desc: "this module through go-redis clients (Options.ViaClient): the go-redis plain path",
		open: func(ms []*redis.Options, ttl time.Duration, _ *benchTelemetry) (impl, error) {
			return openOurs(ms, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix, ViaClient: true})
		},
	},
}, peerImpls...)

// errBsmLost is bsm/redislock's release finding the lock gone (peers.go);
// failureKind counts it as lost.
var errBsmLost = errors.New("redislock: lock not held at release")

// peerNames are the implementations of peers.go, so that naming one in a
// build without it is a usage error that says which tag it needs.
var peerNames = []string{"redlock-rueidis", "redlock-valkey", "redlock-redigo", "redsync-rueidis", "rueidislock", "rueidislock-km1", "redislock"}

// openOursOn is ours over one Master per master, made by m; each m's
// cleanup runs after the Locker is closed.
func openOursOn(ms []*redis.Options, ttl time.Duration, m func(o *redis.Options, i int) (driver.Master, func(), error)) (impl, error) {
	out := &oursMasters{}
	masters := make([]driver.Master, len(ms))
	for i, o := range ms {
		mm, cleanup, err := m(o, i)
		if cleanup != nil {
			out.cleanups = append(out.cleanups, cleanup)
		}
		if err != nil {
			out.close()
			return nil, fmt.Errorf("master %d: %w", i, err)
		}
		masters[i] = mm
	}
	l, err := redlock.NewMasters(masters, &redlock.Options{TTL: ttl, KeyPrefix: keyPrefix})
	if err != nil {
		out.close()
		return nil, err
	}
	out.ours = &ours{l: l}
	return out, nil
}

type oursMasters struct {
	*ours
	cleanups []func()
}

func (o *oursMasters) close() error {
	var err error
	if o.ours != nil {
		err = o.l.Close()
	}
	for _, f := range o.cleanups {
		f()
	}
	return err
}

// funcHeld is a lock released by a function, with its validity computed
// as TTL − the time to acquire.
type funcHeld struct {
	release func(context.Context) error
	v       validitySample
}

func (h *funcHeld) unlock(ctx context.Context) error { return h.release(ctx) }
func (h *funcHeld) validity() validitySample         { return h.v }
