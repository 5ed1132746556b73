package redlock

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/transport"
)

// How commands reach a master (docs/design.md §10) is package
// internal/transport's: a stream per master over a link (a dedicated
// pipelined connection, go-redis pipelines through the client, or a
// Master's Do), or for a Redis Cluster master a stream per shard. What
// it asks of the protocol is here: the commands (cmd.go, which implement
// transport.Command), the scripts to load, what a refused permission or a
// duplicate master means (wireProtocol), which server each master reaches
// (identities), and the Locker's clock (wireEnv, env.go).

// A pathway is how the Locker reaches one master: a transport.Path.
type pathway struct{ p transport.Path }

// pathConfig is what a master's path needs from its Locker, and all it
// may use of it.
type pathConfig = transport.Config

// submitted is what became of a submitted command.
type submitted = transport.Submitted

const (
	sent    = transport.Sent    // queued: its reply will come to its round
	parked  = transport.Parked  // a release held back until the master answers
	refused = transport.Refused // not sent: the master is not answering, or closed
)

func (w pathway) submit(c *cmd, now time.Time) submitted { return w.p.Submit(c, now) }

// skipError is why a refused command was not sent: ErrUnavailable, or the
// error that made the master unusable (acl.go).
func (w pathway) skipError() error { return w.p.SkipError() }

func (w pathway) stats() MasterStats { return masterStats(w.p.Stats()) }

func (w pathway) close() { w.p.Close() }

// cluster reports whether the master is a Redis Cluster served shard by
// shard.
func (w pathway) cluster() bool { return transport.IsCluster(w.p) }

// newPath returns the path to master m, a go-redis client: the one place
// that chooses is transport.NewPath.
func newPath(cfg *pathConfig, m redis.UniversalClient, viaClient bool) pathway {
	return pathway{transport.NewPath(cfg, m, viaClient)}
}

// newClientPath is the path to a Master that is not a go-redis client.
func newClientPath(cfg *pathConfig, m driver.Master) pathway {
	return pathway{transport.NewClientPath(cfg, m)}
}

// wireProtocol is what the transport asks of the protocol, the same for
// every master.
var wireProtocol = &transport.Protocol{
	Scripts: scriptSources(),
	Load:    func(i int) transport.Command { return &cmd{kind: cmdLoad, more: &cmdMore{script: scriptList[i]}} },
	Refusal: func(what, text string) error {
		if aclRefusal(text) {
			return refusedError(what, text)
		}
		return nil
	},
	Invalid: func(err error) bool {
		var inv *invalidError
		return errors.As(err, &inv)
	},
}

// scriptSources are the scripts' sources, in scriptList's order.
func scriptSources() []string {
	src := make([]string, len(scriptList))
	for i, sc := range scriptList {
		src[i] = sc.src
	}
	return src
}

// MasterStats is what the Locker knows about one master.
type MasterStats struct {
	// Addr is the master's address as its client reports it.
	Addr string
	// Skipped: the master is not answering, and new commands are not
	// sent to it.
	Skipped bool
	// Deferred is how many releases wait for the master to answer again;
	// Dropped how many were given up for room (their keys expire with
	// their TTL).
	Deferred int
	Dropped  uint64
	// Written counts the commands written to the master.
	Written uint64
	// RoundP50 and RoundP99 are the median and 99th percentile of the
	// master's answer times in the Locker's last 128 rounds it answered
	// (from each round's start; 0 before any answer).
	RoundP50, RoundP99 time.Duration
	// Shards has one entry per shard master node when the master is a
	// Redis Cluster on the fast path (Addr: the node's address), nil
	// otherwise. The fields above are then their sums, and Skipped is
	// set while any shard is skipped.
	Shards []MasterStats
}

// masterStats is a path's stats as MasterStats, round times aside.
func masterStats(st transport.Stats) MasterStats {
	ms := MasterStats{Addr: st.Addr, Skipped: st.Skipped, Deferred: st.Deferred, Dropped: st.Dropped, Written: st.Written}
	for _, sh := range st.Shards {
		ms.Shards = append(ms.Shards, masterStats(sh))
	}
	return ms
}

// identities records which server (run_id) or Redis Cluster node each
// master reaches, so that two masters that are one are caught.
type identities struct {
	addrs   []string // each master's address, set by New
	mu      sync.Mutex
	owner   map[identity]int
	invalid error // the first duplicate found
}

// identity is a server's run_id, or (node set) a Redis Cluster node id.
type identity struct {
	id   string
	node bool
}

// Claim is claim for the transport (transport.Claimer).
func (d *identities) Claim(master int, id string, node bool) error {
	return d.claim(master, identity{id: id, node: node})
}

// claim records that master i reaches id, and fails, wrapping ErrInvalid,
// when another master reaches it too. An empty id cannot be checked.
func (d *identities) claim(i int, id identity) error {
	if id.id == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owner == nil {
		d.owner = map[identity]int{}
	}
	j, ok := d.owner[id]
	if !ok || j == i {
		d.owner[id] = i
		return nil
	}
	var err error
	a, b := min(i, j), max(i, j)
	names := ""
	if b < len(d.addrs) && d.addrs[a] != "" && d.addrs[b] != "" {
		names = fmt.Sprintf(", %s and %s,", d.addrs[a], d.addrs[b])
	}
	if id.node {
		err = invalid(fmt.Sprintf("masters %d and %d%s share the Redis Cluster node %s: a quorum needs independent masters (separate clusters, no replication between them)", a, b, names, id.id))
	} else {
		err = invalid(fmt.Sprintf("masters %d and %d%s are the same server (run_id %s): a quorum needs independent masters", a, b, names, id.id))
	}
	if d.invalid == nil {
		d.invalid = err
	}
	return err
}

// err is the first duplicate found, or nil.
func (d *identities) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.invalid
}

// isFailover reports whether c is a Sentinel failover client.
func isFailover(c *redis.Client) bool { return transport.IsFailover(c) }

// keySlot returns key's Redis Cluster hash slot, by which the transport
// sends a command to a Cluster master's shard.
func keySlot(key string) uint16 { return transport.KeySlot(key) }
