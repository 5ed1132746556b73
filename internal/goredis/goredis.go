// Package goredis holds what package redlock's go-redis paths and
// package driver's GoRedis share: a pipeline that go-redis never sends
// twice, a reply read back as its RESP type, and a client's address.
package goredis

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Pipeline sends n commands, which add queues, as one go-redis pipeline
// through c. Its error is the first that is not a reply (nil, or the
// server's error): the outcome of every command is then unknown.
func Pipeline(ctx context.Context, c redis.UniversalClient, n int, add func(p redis.Pipeliner, i int) *redis.Cmd) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = add(p, i)
		}
		return nil
	})
	if err != nil {
		for _, c := range cmds {
			if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) && !IsServerError(e) {
				return nil, e
			}
		}
	}
	return cmds, nil
}

// Run sends the command lines cmds as one pipeline through c (Pipeline,
// each command NoRetry), and returns what holds each reply.
func Run(ctx context.Context, c redis.UniversalClient, cmds [][]string) ([]*redis.Cmd, error) {
	return Pipeline(ctx, c, len(cmds), func(p redis.Pipeliner, i int) *redis.Cmd {
		args := make([]any, len(cmds[i]))
		for j, a := range cmds[i] {
			args[j] = a
		}
		rc := redis.NewCmd(ctx, args...)
		p.Process(ctx, NoRetry{Cmd: rc})
		return rc
	})
}

// IsServerError reports whether err is an error reply from the server.
func IsServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// NoRetry is a command go-redis must not send again by itself: a pipeline
// holding one is never retried (after a timeout, say). A SET that ran but
// whose reply was lost would answer nil when sent again, and count as
// refused; a batch sent again on another connection could also run after
// what is sent next. A failed batch breaks the link instead.
type NoRetry struct{ *redis.Cmd }

// NoRetry is what go-redis asks of a command it may retry.
func (NoRetry) NoRetry() bool { return true }

// Reply is a go-redis command's result as the RESP reply it was: Type is
// '+' (the simple string OK), '-' (an error, in Text), ':' (in N), '$' (a
// bulk string, in Text), '_' (null) or '*' (anything else).
func Reply(c *redis.Cmd) (typ byte, n int64, text string) {
	err := c.Err()
	switch {
	case errors.Is(err, redis.Nil):
		return '_', 0, ""
	case err != nil:
		return '-', 0, strings.TrimPrefix(err.Error(), "redis: ")
	}
	switch v := c.Val().(type) {
	case int64:
		return ':', v, ""
	case string:
		if v == "OK" {
			return '+', 0, "OK"
		}
		return '$', 0, v
	case nil:
		return '_', 0, ""
	}
	return '*', 0, ""
}

// Addr names the master c reaches: its address, lower case (several,
// comma-separated, for a cluster), or "" when the client does not say.
func Addr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return strings.ToLower(c.Options().Addr)
	case *redis.ClusterClient:
		return strings.ToLower(strings.Join(c.Options().Addrs, ","))
	}
	return ""
}
