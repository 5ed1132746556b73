package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
)

// Masters that are Redis Clusters (-cluster NxS): each master is one lab
// cluster of S shard masters, named in Masters.Addrs by its nodes'
// addresses joined with commas (as redlock's MasterResult.Addr names it),
// and reached through a *redis.ClusterClient by every implementation.

// maxClusterNodes bounds -cluster's N×S: each node is a redis-server process.
const maxClusterNodes = 64

// parseClusterShape parses -cluster: "NxS" (or "N×S"), N clusters of S
// shards.
func parseClusterShape(s string) (n, shards int, err error) {
	a, b, ok := strings.Cut(strings.ReplaceAll(strings.ToLower(s), "×", "x"), "x")
	if !ok {
		return 0, 0, usagef("-cluster: %q is not NxS (clusters x shards, e.g. 3x3)", s)
	}
	n, err1 := strconv.Atoi(strings.TrimSpace(a))
	shards, err2 := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, usagef("-cluster: %q is not NxS with whole numbers (e.g. 3x3)", s)
	case n < 1 || shards < 1:
		return 0, 0, usagef("-cluster: %q needs at least 1 cluster of 1 shard", s)
	case n*shards > maxClusterNodes:
		return 0, 0, usagef("-cluster: %q is %d redis-server processes, more than %d", s, n*shards, maxClusterNodes)
	}
	return n, shards, nil
}

// startClusterMasters starts n lab clusters of shards shards each. The
// stall scenario stops a master by stopping every shard of its cluster.
func startClusterMasters(ctx context.Context, n, shards int) (*masters, error) {
	cl, err := lab.StartClusters(ctx, n, shards, nil)
	if err != nil {
		return nil, fmt.Errorf("starting %d local clusters of %d shards: %w", n, shards, err)
	}
	addrs := make([]string, n)
	var nodes []string
	for i := range n {
		addrs[i] = strings.Join(cl.Addrs(i), ",")
		nodes = append(nodes, cl.Addrs(i)...)
	}
	each := func(i int, f func(i, s int) error) error {
		var errs []error
		for s := range shards {
			errs = append(errs, f(i, s))
		}
		return errors.Join(errs...)
	}
	m := &masters{
		info: Masters{Kind: "lab-cluster", N: n, Addrs: addrs,
			StallMethod: "SIGSTOP/SIGCONT of every shard node of the master's cluster (lab.Clusters.Pause/Resume)",
			Note:        fmt.Sprintf("%d independent Redis Clusters of %d shard masters each (local redis-server processes in cluster mode, no replicas, started by package lab); each cluster is one master, reached through a go-redis ClusterClient", n, shards)},
		pause:  func(_ context.Context, i int, _ time.Duration) error { return each(i, cl.Pause) },
		resume: func(i int) error { return each(i, cl.Resume) },
		close:  cl.Close,
	}
	m.opts = plainOptions(addrs)
	m.admin = newClients(plainOptions(nodes)) // one per node: SCAN sees one node's keys
	return m, nil
}

// newMasterClient is a client for one master: a ClusterClient when o.Addr
// lists a cluster's nodes (comma-separated), with o's user, password and
// TLS; else a client with o.
func newMasterClient(o *redis.Options) redis.UniversalClient {
	if strings.Contains(o.Addr, ",") {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(o.Addr, ","),
			Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig})
	}
	c := *o
	return redis.NewClient(&c)
}

func newMasterClients(ms []*redis.Options) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(ms))
	for i, o := range ms {
		out[i] = newMasterClient(o)
	}
	return out
}

func closeMasterClients(cs []redis.UniversalClient) error {
	var errs []error
	for _, c := range cs {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
