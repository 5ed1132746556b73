package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/keys"
	"github.com/quorumlab/redlock/validity"
)

// primitiveKeys are the keys reset deletes under a semaphore's or a
// read-write lock's stem: the permits record, every slot, the writer, a
// waiting writer's intent and the readers. Never the writer's fence
// counter (fences must stay monotonic), nor the count of write grants
// (stem+":wg", which expires with the last grant's TTL).
func primitiveKeys(stem string) []string {
	names := []string{stem + ":meta", stem + ":w", stem + ":wi", stem + ":r"}
	for j := 1; j <= keys.MaxPermits; j++ {
		names = append(names, stem+":s:"+strconv.Itoa(j))
	}
	return names
}

// cmdReset deletes every key of the semaphore, the read-write lock and the
// election called resource, on every master: for one whose holders are
// gone (a holder still running loses its permit, read or write lock, or
// leadership, at its next extension). It needs a majority of masters to
// answer the read, and refuses a name with no such keys. An election
// loses its lock key, record and queue (electionResetKeys), never its
// fence counter.
func cmdReset(ctx context.Context, s *conns, resource string, f releaseFlags, asJSON bool, stdout io.Writer) int {
	stem, _, err := keyFor(s.r.keyOpts, resource)
	if err != nil {
		fmt.Fprintf(s.stderr, "redlock: resource %q: %v\n", printable(resource), err)
		return exitUsage
	}
	refuse := func(code int, format string, a ...any) int {
		fmt.Fprintf(s.stderr, "redlock: reset declined: "+format+" (exit %d)\n", append(a, code)...)
		return code
	}
	if s.r.keyOpts.RedsyncKeys {
		return refuse(exitUsage, "with -redsync-keys every key is a mutex's: there is no semaphore or read-write lock to reset")
	}
	nodes := s.readPrim(ctx, "reset: semaphore and read-write keys", stem)
	n, answered := len(nodes), 0
	for _, pm := range nodes {
		if pm.Answered {
			answered++
		}
	}
	majority := validity.Majority(n)
	if answered < majority {
		return refuse(exitQuorum, "only %d of %d masters answered; a reset needs a majority (%d) to see what is there", answered, n, majority)
	}
	election := newElectionView(stem, s.readElection(ctx, "reset: the election's keys", stem)) != nil
	if newPrimView(nodes) == nil && !election {
		return refuse(exitRefused, "%q has no semaphore, read-write lock or election keys on any master that answered: nothing to reset", printable(resource))
	}
	keys := append(primitiveKeys(stem), electionResetKeys(stem)...)
	return s.forceDelete(ctx, forced{
		event: "force-reset", resource: resource, key: stem + ":*", chosen: "reset", majority: majority,
		note: "fence counters and write-grant count left as they are",
		del: func(ctx context.Context, c *redis.Client) (int64, error) {
			return c.Del(ctx, keys...).Result()
		},
	}, f, asJSON, stdout)
}
