package driver

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/goredis"
)

// GoRedis returns a Master for the master that go-redis options o name
// (address, dialer, TLS, user, password, DB). The Locker recognises it
// and opens a connection of its own with them, as redlock.New does for a
// *redis.Client (the fast path), and its Close closes the client made
// here. An adapter whose client's options can be read uses it; so does a
// Locker that mixes a go-redis master with others.
func GoRedis(o *redis.Options) Master {
	if o == nil {
		return goRedis{} // refused by the Locker as a nil client
	}
	return goRedis{redis.NewClient(o)}
}

// goRedis is a go-redis client as a Master. Its exported method
// GoRedisClient is how package redlock recognises one (and closes it);
// Do serves the callers that call a Master directly (a wrapper).
type goRedis struct{ c redis.UniversalClient }

// GoRedisClient returns the client (nil for nil options).
func (g goRedis) GoRedisClient() redis.UniversalClient { return g.c }

// Addr is the client's address (several, comma-separated, for a cluster).
func (g goRedis) Addr() string { return goredis.Addr(g.c) }

// Do runs cmds as one go-redis pipeline through the client.
func (g goRedis) Do(ctx context.Context, cmds [][]string) ([]Reply, error) {
	rc, err := goredis.Run(ctx, g.c, cmds)
	if err != nil {
		return nil, err
	}
	out := make([]Reply, len(rc))
	for i, c := range rc {
		typ, n, text := goredis.Reply(c)
		switch typ {
		case '_':
			out[i] = Reply{Kind: ReplyNil}
		case '+':
			out[i] = Reply{Kind: ReplyStatus, Text: text}
		case '-':
			out[i] = Reply{Kind: ReplyError, Text: text}
		case ':':
			out[i] = Reply{Kind: ReplyInt, Int: n}
		case '$':
			out[i] = Reply{Kind: ReplyBulk, Text: text}
		default:
			out[i] = Reply{Kind: ReplyOther}
		}
	}
	return out, nil
}
