package redlock

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// How commands reach a master (docs/design.md §10): newPath picks one of
// three paths for each master, once, at New.
//
//   - A *redis.Client the Locker can dial itself: the fast path, one
//     dedicated pipelined connection (fast.go) behind a stream (stream.go).
//   - A *redis.ClusterClient the same: one such stream per shard master,
//     behind a shardSet (cluster.go).
//   - Anything else, or every client with Options.ViaClient: the plain
//     path, go-redis pipelines through the client (plain.go), behind a
//     stream.

// A pathway is how the Locker reaches one master: a stream, or, for a
// Redis Cluster master, a shardSet of streams.
type pathway interface {
	submit(c *cmd, now time.Time) submitted
	// skipError is why a refused command was not sent: ErrUnavailable,
	// or the error that made the master unusable (acl.go).
	skipError() error
	stats() MasterStats
	close()
}

var (
	_ pathway = (*stream)(nil)
	_ pathway = (*shardSet)(nil)
)

// pathConfig is what a master's path needs from its Locker, and all it
// may use of it.
type pathConfig struct {
	master      int    // the master's index
	addr        string // its address, for stats, logs and errors
	nodeTimeout time.Duration
	log         *slog.Logger
	ids         *identities   // which server each master reaches
	tried       *atomic.Int32 // masters whose first dial has ended
	env         env           // the Locker's clock and waits
}

// newPath returns the path to master m: the one place that chooses.
func newPath(cfg *pathConfig, m redis.UniversalClient, viaClient bool) pathway {
	if !viaClient {
		switch c := m.(type) {
		case *redis.ClusterClient:
			if no := clusterNodeOptions(c); no != nil {
				return newShardSet(cfg, c, no) // one stream per shard
			}
		case *redis.Client:
			if fo := fastOptions(c); fo != nil {
				var giveUp time.Duration
				// go-redis: 0 means 3s, −1 and −2 no timeout.
				switch rt := fo.ReadTimeout; {
				case rt == 0:
					giveUp = 3 * time.Second
				case rt > 0:
					giveUp = max(rt, cfg.nodeTimeout)
				}
				var s *stream
				s = newStream(cfg, func() (link, string, error) { return s.dialRESP(fo) }, giveUp)
				return s
			}
		}
	}
	var s *stream
	s = newStream(cfg, func() (link, string, error) { return s.dialPlain(m) }, 0)
	return s
}

// fastOptions returns the client's options when the fast path can serve
// it, or nil: it needs connection setup it can reproduce (no OnConnect
// hook, no credentials provider), and not a Sentinel failover client,
// which must follow failovers.
func fastOptions(c *redis.Client) *redis.Options {
	o := c.Options()
	if isFailover(c) || o.OnConnect != nil || o.CredentialsProvider != nil ||
		o.CredentialsProviderContext != nil || o.StreamingCredentialsProvider != nil {
		return nil
	}
	return o
}

// isFailover reports whether c is a Sentinel failover client. go-redis
// returns it as a plain *redis.Client whose only mark is this address.
func isFailover(c *redis.Client) bool { return c.Options().Addr == "FailoverClient" }

// clusterNodeOptions returns the options for a dedicated connection to one
// node of cc (Addr left empty), or nil when the fast path cannot reproduce
// the cluster client's connection setup: its own NewClient, an OnConnect
// hook, or a credentials provider.
func clusterNodeOptions(cc *redis.ClusterClient) *redis.Options {
	co := cc.Options()
	// go-redis fills in NewClient with redis.NewClient; another one is
	// the caller's own (functions compare only by their code pointer).
	ownNewClient := co.NewClient != nil && reflect.ValueOf(co.NewClient).Pointer() != reflect.ValueOf(redis.NewClient).Pointer()
	if ownNewClient || co.OnConnect != nil || co.CredentialsProvider != nil ||
		co.CredentialsProviderContext != nil || co.StreamingCredentialsProvider != nil {
		return nil
	}
	return &redis.Options{
		Dialer:      co.Dialer,
		Username:    co.Username,
		Password:    co.Password,
		TLSConfig:   co.TLSConfig,
		DialTimeout: co.DialTimeout,
		ReadTimeout: co.ReadTimeout,
	}
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

// runIDOf returns the run_id field of an INFO server reply ("" if none).
func runIDOf(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
