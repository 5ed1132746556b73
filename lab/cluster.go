//go:build unix

package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/slot"
	"github.com/redis/go-redis/v9"
)

// Clusters is N independent Redis Clusters started by StartClusters: each
// one is a small cluster of S shard masters (redis-server processes in
// cluster mode, no replicas), and each cluster is one master of a
// Redlock quorum. The clusters know nothing of each other. Its methods
// are safe for concurrent use. Close must be called (ClustersForTest
// arranges it).
//
// Shard s of every cluster serves the same slots: an even split of the
// 16384 slots, SlotRange(s). Slot and ShardOf say where a key lives
// without asking a server (so they work while a shard is paused).
type Clusters struct {
	n, shards int
	be        *processBackend
	log       *slog.Logger
	addrs     [][]string        // [cluster][shard] node addresses
	nodes     [][]*redis.Client // [cluster][shard] direct clients

	mu      sync.Mutex
	clients []*redis.ClusterClient // Client(i), created once
	extra   []*redis.ClusterClient // from Clients, closed by Close
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// clusterSettleTimeout bounds how long a new cluster may take to agree on
// its slots.
const clusterSettleTimeout = 30 * time.Second

// StartClusters starts n independent Redis Clusters of shards masters each
// (n × shards redis-server processes with cluster-enabled yes on free
// 127.0.0.1 ports, no replicas), assigns every cluster's slots evenly
// (CLUSTER ADDSLOTSRANGE), joins each cluster's nodes (CLUSTER MEET), and
// returns once every node of every cluster reports cluster_state:ok and the
// same slot map. cluster-require-full-coverage is off, so the healthy
// shards of a cluster keep serving while another is stopped. Only the
// Process backend runs clusters, without the proxy; Options.AppendFsyncAlways
// applies. On error nothing is left running. opts may be nil.
func StartClusters(ctx context.Context, n, shards int, opts *Options) (*Clusters, error) {
	switch {
	case n < 1:
		return nil, fmt.Errorf("lab: need at least one cluster, got %d", n)
	case shards < 1 || shards > 64:
		return nil, fmt.Errorf("lab: shards per cluster must be from 1 to 64, got %d", shards)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if b := cmp.Or(o.Backend, Backend(os.Getenv("REDLOCK_LAB_BACKEND")), Process); b != Process {
		return nil, fmt.Errorf("lab: clusters run on the %q backend only, not %q", Process, b)
	}
	if o.Proxy {
		return nil, errors.New("lab: clusters do not support Options.Proxy")
	}
	if o.TLS || o.ACLUser != "" {
		return nil, errors.New("lab: clusters do not support Options.TLS or an ACL user")
	}
	bin, err := exec.LookPath(cmp.Or(o.RedisServer, "redis-server"))
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", ErrNoRedisServer, err)
	}
	be, err := newProcessBackend(bin, o.AppendFsyncAlways, n*shards, o.Logger)
	if err != nil {
		return nil, err
	}
	be.sec = &security{} // plain TCP, no ACL user
	be.extra = func() ([]string, error) {
		// The bus port is chosen here, not port+10000, which may be
		// past 65535 for an ephemeral port; a lost race for it fails the
		// start with "Address already in use", and the launch is retried.
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		return []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // in the node's own data dir
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-require-full-coverage", "no",
			// A node learns its own address from a MEET; a lone node
			// never gets one.
			"--cluster-announce-ip", "127.0.0.1",
		}, nil
	}
	c := &Clusters{n: n, shards: shards, be: be, log: o.Logger}
	fail := func(err error) (*Clusters, error) {
		c.closeNodes()
		return nil, errors.Join(err, be.close())
	}
	// The first failed start cancels the others.
	flat, err := startAll(ctx, n*shards, be.start)
	if err != nil {
		return fail(err)
	}
	for i := range n {
		c.addrs = append(c.addrs, flat[i*shards:(i+1)*shards])
		var row []*redis.Client
		for _, a := range c.addrs[i] {
			row = append(row, redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true}))
		}
		c.nodes = append(c.nodes, row)
	}
	if err := fanOut(ctx, n, c.form); err != nil {
		return fail(err)
	}
	for i := range n {
		c.clients = append(c.clients, redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(i)}))
	}
	c.log.Info("lab: clusters up", "clusters", n, "shards", shards, "addrs", c.addrs)
	return c, nil
}

// ClustersForTest starts clusters like StartClusters and closes them in
// tb.Cleanup. It fails the test with the reason when they cannot start.
func ClustersForTest(tb testing.TB, n, shards int, opts *Options) *Clusters {
	tb.Helper()
	c, err := StartClusters(tb.Context(), n, shards, opts)
	if err != nil {
		tb.Fatalf("lab: starting %d redis clusters of %d shards: %v", n, shards, err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("lab: close: %v", err)
		}
	})
	return c
}

// form assigns cluster i's slots, joins its nodes and waits for them to
// agree.
func (c *Clusters) form(ctx context.Context, i int) error {
	nodes := c.nodes[i]
	for s, nd := range nodes {
		lo, hi := c.SlotRange(s)
		if err := nd.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("lab: cluster %d shard %d: CLUSTER ADDSLOTSRANGE %d %d: %w", i, s, lo, hi, err)
		}
	}
	for s := 1; s < len(nodes); s++ {
		bus, err := nodes[s].ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			return fmt.Errorf("lab: cluster %d shard %d: CONFIG GET cluster-port: %w", i, s, err)
		}
		_, port, _ := strings.Cut(c.addrs[i][s], ":")
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, bus["cluster-port"]).Err(); err != nil {
			return fmt.Errorf("lab: cluster %d: CLUSTER MEET shard %d: %w", i, s, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, clusterSettleTimeout)
	defer cancel()
	t := time.NewTicker(2 * probeEvery)
	defer t.Stop()
	var last error
	for {
		err := c.agreed(ctx, i)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: cluster %d did not settle: %w (last: %v)", i, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// agreed reports nil once every node of cluster i says cluster_state:ok
// and maps every shard's slots to that shard's node.
func (c *Clusters) agreed(ctx context.Context, i int) error {
	for s, nd := range c.nodes[i] {
		info, err := nd.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("shard %d: state not ok", s)
		}
		slots, err := nd.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		if len(slots) != c.shards {
			return fmt.Errorf("shard %d sees %d slot ranges, want %d", s, len(slots), c.shards)
		}
		slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
		for k, r := range slots {
			lo, hi := c.SlotRange(k)
			if r.Start != lo || r.End != hi || len(r.Nodes) == 0 || r.Nodes[0].Addr != c.addrs[i][k] {
				return fmt.Errorf("shard %d sees slots %d-%d on %v, want %d-%d on %s", s, r.Start, r.End, r.Nodes, lo, hi, c.addrs[i][k])
			}
		}
	}
	return nil
}

// N returns the number of clusters.
func (c *Clusters) N() int { return c.n }

// Shards returns the number of shards (masters) per cluster.
func (c *Clusters) Shards() int { return c.shards }

// Addrs returns the node addresses of cluster i, by shard, or nil when i
// is out of range. The slice is a copy.
func (c *Clusters) Addrs(i int) []string {
	if i < 0 || i >= c.n {
		return nil
	}
	return slices.Clone(c.addrs[i])
}

// Client returns a go-redis cluster client with default options for
// cluster i, the same one on every call; Close closes it. It returns nil
// when i is out of range.
func (c *Clusters) Client(i int) *redis.ClusterClient {
	if i < 0 || i >= c.n {
		return nil
	}
	return c.clients[i]
}

// Clients returns new default-option cluster clients for clusters
// 0..N-1 on every call, so a test can build several independent lockers.
// Close closes them all.
func (c *Clusters) Clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, c.n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.n {
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(i)})
		if c.closed {
			_ = cl.Close()
		} else {
			c.extra = append(c.extra, cl)
		}
		out[i] = cl
	}
	return out
}

// Node returns a plain client straight to shard s of cluster i (it
// honours context deadlines), for looking at what one node holds; the
// same one on every call; Close closes it. A key of another shard's slots
// gets a MOVED error from it. It returns nil when out of range.
func (c *Clusters) Node(i, s int) *redis.Client {
	if i < 0 || i >= c.n || s < 0 || s >= c.shards {
		return nil
	}
	return c.nodes[i][s]
}

// SlotRange returns the first and last slot shard s serves, in every
// cluster.
func (c *Clusters) SlotRange(s int) (lo, hi int) {
	return s * clusterSlots / c.shards, (s+1)*clusterSlots/c.shards - 1
}

// ShardOf returns the shard that serves key's slot, in every cluster.
func (c *Clusters) ShardOf(key string) int {
	slot := Slot(key)
	for s := range c.shards {
		if _, hi := c.SlotRange(s); slot <= hi {
			return s
		}
	}
	return c.shards - 1 // not reached: the ranges cover every slot
}

const clusterSlots = slot.Count

// Slot returns key's Redis Cluster hash slot, as CLUSTER KEYSLOT does:
// CRC16 (XMODEM) of the hash tag (the text between the first '{' and the
// next '}', when not empty), else of the whole key, modulo 16384.
func Slot(key string) int { return int(slot.Of(key)) }

func (c *Clusters) index(i, s int) (int, error) {
	if i < 0 || i >= c.n || s < 0 || s >= c.shards {
		return 0, fmt.Errorf("lab: cluster %d shard %d out of range [0, %d) × [0, %d)", i, s, c.n, c.shards)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errClosed
	}
	return i*c.shards + s, nil
}

// Pause freezes shard s of cluster i with SIGSTOP and returns once it is
// stopped: its sockets stay open and it answers nothing (neither clients
// nor its cluster's bus) until Resume. The other shards keep serving
// their slots.
func (c *Clusters) Pause(i, s int) error {
	k, err := c.index(i, s)
	if err != nil {
		return err
	}
	c.log.Debug("lab: pause", "cluster", i, "shard", s)
	return c.be.pause(k)
}

// Resume continues shard s of cluster i with SIGCONT.
func (c *Clusters) Resume(i, s int) error {
	k, err := c.index(i, s)
	if err != nil {
		return err
	}
	c.log.Debug("lab: resume", "cluster", i, "shard", s)
	return c.be.resume(k)
}

// ResumeAll resumes every node, paused or not, ignoring errors; for
// cleanups that must not leave a node stopped.
func (c *Clusters) ResumeAll() {
	for i := range c.n {
		for s := range c.shards {
			_ = c.Resume(i, s)
		}
	}
}

// Close kills every node (paused ones too), closes every client handed
// out and removes the temp directories. It is idempotent.
func (c *Clusters) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		clients := append(slices.Clone(c.clients), c.extra...)
		c.extra = nil
		c.mu.Unlock()
		var errs []error
		for _, cl := range clients {
			if err := cl.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
				errs = append(errs, err)
			}
		}
		c.closeNodes()
		errs = append(errs, c.be.close())
		c.closeErr = errors.Join(errs...)
		c.log.Info("lab: clusters closed", "err", c.closeErr)
	})
	return c.closeErr
}

func (c *Clusters) closeNodes() {
	for _, row := range c.nodes {
		for _, nd := range row {
			_ = nd.Close()
		}
	}
}
