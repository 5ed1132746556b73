package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
)

// masters are the servers every implementation is measured on, and the way
// to stop one for the stall scenario.
type masters struct {
	info Masters
	// pause stops master i answering; for is how long the caller will keep
	// it stopped (only the CLIENT PAUSE method needs it: it ends by itself).
	pause  func(ctx context.Context, i int, for_ time.Duration) error
	resume func(i int) error
	// cpu, where the masters are one process of the bench's that does not
	// report INFO cpu (embedded), is that process's CPU time so far; nil
	// elsewhere.
	cpu func(ctx context.Context) (time.Duration, error)
	// cut and heal partition master i and end it; nil where the masters
	// cannot be cut (only -docker's can).
	cut, heal func(i int) error
	close     func() error
	// admin has one default client per master, for deleting the bench's
	// keys between cells.
	admin []*redis.Client
	// opts are each master's client options, what implementations open.
	opts []*redis.Options
}

// plainOptions are default client options for addrs.
func plainOptions(addrs []string) []*redis.Options {
	out := make([]*redis.Options, len(addrs))
	for i, a := range addrs {
		out[i] = &redis.Options{Addr: a}
	}
	return out
}

// openMasters picks the masters: -addrs, else lab's redis-server processes,
// else embedded miniredis (or embedded when asked). It says on stderr which.
func openMasters(ctx context.Context, cfg *config, stderr io.Writer) (*masters, error) {
	if len(cfg.masterOpts) > 0 {
		return dialMasters(ctx, cfg.masterOpts)
	}
	if cfg.clusters > 0 {
		return startClusterMasters(ctx, cfg.clusters, cfg.shards) // cluster.go
	}
	if cfg.docker {
		return startDockerMasters(ctx, cfg.masters) // docker.go
	}
	if !cfg.embedded {
		cl, err := lab.Start(ctx, cfg.masters, nil)
		switch {
		case err == nil:
			m := &masters{
				info: Masters{Kind: "lab", N: cfg.masters, Addrs: cl.Addrs(), StallMethod: "SIGSTOP/SIGCONT (lab.Masters.Pause/Resume)",
					Note: "local redis-server processes on loopback, started by package lab"},
				pause:  func(_ context.Context, i int, _ time.Duration) error { return cl.Pause(i) },
				resume: cl.Resume,
				close:  cl.Close,
			}
			m.opts = plainOptions(m.info.Addrs)
			m.admin = newClients(m.opts)
			return m, nil
		case errors.Is(err, lab.ErrNoRedisServer):
			fmt.Fprintln(stderr, "redlock-bench: redis-server not found; using embedded miniredis masters in a child process (library overhead, not a real server)")
		default:
			return nil, fmt.Errorf("starting %d local masters: %w", cfg.masters, err)
		}
	}
	return startEmbedded(ctx, cfg.masters, stderr)
}

// dialMasters checks that every -addrs master answers PING (over TLS and
// as the user its options give); one that does not is a usage error (exit
// 2).
func dialMasters(ctx context.Context, opts []*redis.Options) (*masters, error) {
	addrs := make([]string, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	tls := false
	for i, o := range opts {
		addrs[i] = o.Addr
		tls = tls || o.TLSConfig != nil
		wg.Go(func() {
			c := probeClient(o, 2*time.Second)
			defer c.Close()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := c.Ping(pctx).Err(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", o.Addr, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, usagef("-addrs: master unreachable: %v", err)
	}
	note := "masters given with -addrs"
	if tls {
		note += " (TLS)"
	}
	m := &masters{
		info: Masters{Kind: "addrs", N: len(addrs), Addrs: addrs,
			StallMethod: "CLIENT PAUSE <ms> ALL on a side connection (ends by itself; the bench cannot SIGSTOP masters it did not start)",
			Note:        note},
		resume: func(int) error { return nil },
		opts:   opts,
	}
	m.admin = newClients(opts)
	m.pause = func(ctx context.Context, i int, d time.Duration) error {
		c := probeClient(opts[i], 0)
		defer c.Close()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.Do(pctx, "CLIENT", "PAUSE", max(d.Milliseconds(), 1), "ALL").Err()
	}
	m.close = func() error { return nil }
	return m, nil
}

// probeClient is a one-connection client with o's address, TLS and
// credentials that honours ctx deadlines, with dial and read timeouts when
// timeout is positive.
func probeClient(o *redis.Options, timeout time.Duration) *redis.Client {
	c := *o
	c.ContextTimeoutEnabled, c.MaxRetries, c.PoolSize = true, -1, 1
	if timeout > 0 {
		c.DialTimeout, c.ReadTimeout = timeout, timeout
	}
	return redis.NewClient(&c)
}

// deleteKeys removes every key matching pattern on every master (SCAN +
// DEL: only the bench's own keys, never FLUSHALL, since -addrs masters may
// hold other data).
func (m *masters) deleteKeys(ctx context.Context, pattern string) error {
	errs := make([]error, len(m.admin))
	var wg sync.WaitGroup
	for i, c := range m.admin {
		wg.Go(func() {
			iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
			var keys []string
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				errs[i] = fmt.Errorf("master %d: scan: %w", i, err)
				return
			}
			if len(keys) > 0 {
				// One DEL per key: a cluster node refuses a DEL of keys
				// in different slots (CROSSSLOT).
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, k := range keys {
						p.Del(ctx, k)
					}
					return nil
				})
				if err != nil {
					errs[i] = fmt.Errorf("master %d: del: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *masters) shutdown() error {
	return errors.Join(closeClients(m.admin), m.close())
}
