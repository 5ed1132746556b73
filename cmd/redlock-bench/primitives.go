package main

import (
	"context"
	mrand "math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// The semaphore and rwlock scenarios run this module's semaphore and
// read-write lock beside its mutex on the same one resource, so that the
// ratios to the mutex come from cells that ran next to each other.
var primitiveImpls = []implSpec{
	semImpl(1), semImpl(3), semImpl(8),
	{
		name: "redlock-rw90", source: "acquisition", hidden: true,
		desc: "this module's read-write lock: each operation is RLock with probability 0.9, else Lock (rwlock scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			o, err := openOurs(ms, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix})
			if err != nil {
				return nil, err
			}
			return oursRW{o}, nil
		},
	},
}

// mutexRatioScenarios are the scenarios whose ratios put each other
// implementation over the mutex (oursName), besides the usual ours ÷ other.
var mutexRatioScenarios = []string{"semaphore", "rwlock"}

func semImpl(permits int) implSpec {
	return implSpec{
		name: semImplName(permits), source: "acquisition", hidden: true,
		desc: "this module's semaphore, Acquire and Unlock on one permit (semaphore scenario only)",
		open: func(ms []*redis.Options, ttl time.Duration, tel *benchTelemetry) (impl, error) {
			o, err := openOurs(ms, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix})
			if err != nil {
				return nil, err
			}
			return oursSem{ours: o, permits: permits}, nil
		},
	}
}

func semImplName(permits int) string {
	return map[int]string{1: "redlock-sem1", 3: "redlock-sem3", 8: "redlock-sem8"}[permits]
}

type oursSem struct {
	*ours
	permits int
}

// lock builds the Semaphore on each call: it sends nothing and costs a
// few strings, next to a quorum round.
func (o oursSem) lock(ctx context.Context, resource string) (held, error) {
	s, err := o.l.Semaphore(resource, o.permits)
	if err != nil {
		return nil, err
	}
	lk, err := s.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return oursHeld{lk}, nil
}

type oursRW struct{ *ours }

func (o oursRW) lock(ctx context.Context, resource string) (held, error) {
	rw, err := o.l.RWMutex(resource)
	if err != nil {
		return nil, err
	}
	var lk *redlock.Lock
	if mrand.IntN(10) < 9 {
		lk, err = rw.RLock(ctx)
	} else {
		lk, err = rw.Lock(ctx)
	}
	if err != nil {
		return nil, err
	}
	return oursHeld{lk}, nil
}
