package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
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
			fmt.Fprintln(stderr, "redlock-bench: redis-server not found; using embedded in-process masters (library overhead, not network)")
		default:
			return nil, fmt.Errorf("starting %d local masters: %w", cfg.masters, err)
		}
	}
	return startEmbedded(cfg.masters)
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

// embedded is n in-process miniredis servers.
//
// Two things a real master does that miniredis does not, and how the bench
// makes up for them:
//   - Keys do not expire by themselves (miniredis moves time only on
//     FastForward), so a ticker fast-forwards every running node by the real
//     time that passed: a lock left behind expires as on Redis.
//   - There is no process to SIGSTOP, so a node is stopped by holding its
//     exported mutex (miniredis.Miniredis embeds sync.Mutex, which every
//     command takes): connections stay open and every command waits, as
//     with SIGSTOP.
type embedded struct {
	nodes []*miniredis.Miniredis

	mu     sync.Mutex // guards paused; taken before a node's own mutex
	paused []bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func startEmbedded(n int) (*masters, error) {
	e := &embedded{paused: make([]bool, n), stop: make(chan struct{})}
	addrs := make([]string, n)
	for i := range n {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			for _, o := range e.nodes {
				o.Close()
			}
			return nil, fmt.Errorf("starting embedded master %d: %w", i, err)
		}
		e.nodes = append(e.nodes, m)
		addrs[i] = m.Addr()
	}
	e.wg.Go(e.expire)
	m := &masters{
		info: Masters{Kind: "embedded", N: n, Addrs: addrs,
			StallMethod: "the node's mutex held by the bench (every command waits, connections stay open)",
			Note:        "EMBEDDED in-process miniredis masters: numbers show library overhead, not network or a real server"},
		pause:  func(_ context.Context, i int, _ time.Duration) error { e.pause(i); return nil },
		resume: func(i int) error { e.resume(i); return nil },
		close:  e.close,
	}
	m.opts = plainOptions(addrs)
	m.admin = newClients(m.opts)
	return m, nil
}

// expireEvery is how often embedded masters' clocks are moved on; keys
// expire at most this late.
const expireEvery = 50 * time.Millisecond

func (e *embedded) expire() {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			d := now.Sub(last)
			last = now
			e.mu.Lock()
			for i, m := range e.nodes {
				// A stopped node's clock is not moved: its mutex is ours,
				// and a SIGSTOPped redis-server does not expire keys either
				// (its clock catches up on resume; this one does not,
				// which only keeps leftovers a little longer).
				if !e.paused[i] {
					m.FastForward(d)
				}
			}
			e.mu.Unlock()
		}
	}
}

func (e *embedded) pause(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.paused[i] {
		e.paused[i] = true
		e.nodes[i].Lock()
	}
}

func (e *embedded) resume(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused[i] {
		e.paused[i] = false
		e.nodes[i].Unlock()
	}
}

func (e *embedded) close() error {
	for i := range e.nodes {
		e.resume(i)
	}
	close(e.stop)
	e.wg.Wait()
	for _, m := range e.nodes {
		m.Close()
	}
	return nil
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
