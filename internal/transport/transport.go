// Package transport is how the Locker's commands reach a master and its
// replies come back (docs/design.md §10): one ordered stream per master
// (stream.go) over a link, the RESP2 codec (resp.go), the links (the fast
// path's dedicated connection, fast.go; go-redis pipelines through the
// client, plain.go; a driver.Master's Do, client.go), a Redis Cluster
// master's streams, one per shard (cluster.go), and the wire half of the
// command model (command.go: arguments, replies).
//
// It knows nothing of what the commands mean: package redlock's commands
// implement Command (their arguments, where their replies go, which of
// them are parked and sent again), and Protocol is what else it asks of
// the protocol (the scripts, and which errors make a master unusable).
// It reads the clock and sets timers only through Env, the Locker's.
package transport

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// How commands reach a master: NewPath picks one of three paths for each
// master, once, at New.
//
//   - A *redis.Client the Locker can dial itself: the fast path, one
//     dedicated pipelined connection (fast.go) behind a Stream.
//   - A *redis.ClusterClient the same: one such stream per shard master,
//     behind a shardSet (cluster.go).
//   - Anything else, or every client with Options.ViaClient: the plain
//     path, go-redis pipelines through the client (plain.go), behind a
//     stream.
//
// A Master that is not a go-redis client takes the client path
// (NewClientPath, client.go).

// A Path is how the Locker reaches one master: a Stream, or, for a Redis
// Cluster master, a shardSet of streams.
type Path interface {
	// Submit queues c; now is the caller's reading of the clock (its
	// round's start).
	Submit(c Command, now time.Time) Submitted
	// SkipError is why a refused command was not sent:
	// quorum.ErrUnavailable, or the error that made the master unusable
	// (Protocol.Invalid).
	SkipError() error
	Stats() Stats
	// Close stops the path: nothing more is written, parked releases are
	// dropped, and its goroutines are joined.
	Close()
}

var (
	_ Path = (*Stream)(nil)
	_ Path = (*shardSet)(nil)
)

// IsCluster reports whether p is a Redis Cluster master served shard by
// shard.
func IsCluster(p Path) bool {
	_, ok := p.(*shardSet)
	return ok
}

// Env is the Locker's clock and waits, as the transport uses them: every
// reading of the clock and every timer here goes through it, so that the
// simulator runs the transport on its own clock (docs/design.md §20).
type Env interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc runs f once d has passed, unless stopped first.
	AfterFunc(d time.Duration, f func()) Stopper
	// AfterDone runs f once ctx has ended, unless stop is called first
	// (context.AfterFunc; stop reports whether it kept f from running).
	AfterDone(ctx context.Context, f func()) (stop func() bool)
	// Detached: the transport starts no goroutine of its own; a stream's
	// flush is handed to Later, which runs f once the caller has yielded.
	Detached() bool
	Later(f func())
}

// Stopper cancels what Env.AfterFunc set up (*time.Timer is one).
type Stopper interface{ Stop() bool }

// Config is what a master's path needs from its Locker, and all it may use
// of it.
type Config struct {
	Master      int    // the master's index
	Addr        string // its address, for stats, logs and errors
	NodeTimeout time.Duration
	Log         *slog.Logger
	IDs         Claimer       // which server each master reaches
	Tried       *atomic.Int32 // masters whose first dial has ended
	// Rounds counts the Locker's rounds in flight (submitting or waiting
	// for their replies); nil counts none. A caller writes its own command
	// only while its round is the only one (Stream.Submit).
	Rounds *atomic.Int32
	Env    Env       // the Locker's clock and waits
	Proto  *Protocol // the same for every master
}

// Claimer records which server (run_id) or Redis Cluster node each master
// reaches, so that two masters that are one are caught.
type Claimer interface {
	// Claim records that master reaches id (a Redis Cluster node id when
	// node is set), and fails when another master reaches it too. An
	// empty id cannot be checked.
	Claim(master int, id string, node bool) error
}

// Protocol is what the transport asks of the protocol above it.
type Protocol struct {
	// Scripts are the Lua scripts' sources, loaded on every connection as
	// it is set up.
	Scripts []string
	// Load is the command that loads Scripts[i]: after a NOSCRIPT reply
	// the scripts' loads go in front of the next batch.
	Load func(i int) Command
	// Refusal is the error of the error reply text to what (a command's
	// name) when the master refused it for lack of permission, else nil.
	Refusal func(what, text string) error
	// Invalid reports whether err, from setting a master up, makes it
	// unusable for good (a refused permission, a duplicate master): its
	// path then refuses every command, with err as its SkipError.
	Invalid func(err error) bool
}

// setupError is the error of an error reply to a set-up command name
// (SCRIPT LOAD, INFO, ...).
func (p *Protocol) setupError(name, text string) error {
	if err := p.Refusal(name, text); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w", name, ServerError(text))
}

// NewPath returns the path to master m, a go-redis client: the one place
// that chooses.
func NewPath(cfg *Config, m redis.UniversalClient, viaClient bool) Path {
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
					giveUp = max(rt, cfg.NodeTimeout)
				}
				var s *Stream
				s = NewStream(cfg, func() (Link, string, error) { return s.dialRESP(fo) }, giveUp)
				return s
			}
		}
	}
	var s *Stream
	s = NewStream(cfg, func() (Link, string, error) { return s.dialPlain(m) }, 0)
	return s
}

// NewClientPath is the path to a Master that is not a go-redis client.
func NewClientPath(cfg *Config, m driver.Master) Path {
	var s *Stream
	s = NewStream(cfg, func() (Link, string, error) { return s.dialClient(m) }, 0)
	return s
}

// fastOptions returns the client's options when the fast path can serve
// it, or nil: it needs connection setup it can reproduce (no OnConnect
// hook, no credentials provider), and not a Sentinel failover client,
// which must follow failovers.
func fastOptions(c *redis.Client) *redis.Options {
	o := c.Options()
	if IsFailover(c) || o.OnConnect != nil || o.CredentialsProvider != nil ||
		o.CredentialsProviderContext != nil || o.StreamingCredentialsProvider != nil {
		return nil
	}
	return o
}

// IsFailover reports whether c is a Sentinel failover client. go-redis
// returns it as a plain *redis.Client whose only mark is this address.
func IsFailover(c *redis.Client) bool { return c.Options().Addr == "FailoverClient" }

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

// runIDOf returns the run_id field of an INFO server reply ("" if none).
func runIDOf(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Stats is what a path knows about its master (package redlock's
// MasterStats, without the round times, which are the Locker's).
type Stats struct {
	Addr     string
	Skipped  bool // not answering: new commands are not sent to it
	Deferred int  // releases waiting for it to answer again
	Dropped  uint64
	Written  uint64
	// Shards has one entry per shard master node of a Redis Cluster
	// master, nil otherwise.
	Shards []Stats
}
