package redlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/goredis"
)

// The plain path, for clients the fast path cannot reproduce (cluster,
// Sentinel failover, ring, or a client with a credentials provider or an
// OnConnect hook), or when Options.ViaClient asks for it: the stream's
// flusher sends each batch as one go-redis pipeline through the client's
// own pool and hooks, one batch at a time, so order is kept. A stalled
// master holds the batch for the client's ReadTimeout; the round does not
// wait for it (its timer) and new commands are not sent meanwhile (the
// breaker).

type plainLink struct {
	s *stream
	c redis.UniversalClient
}

func (p *plainLink) direct() bool { return false }
func (p *plainLink) close()       {}

// dialPlain loads the scripts (on every shard, for a cluster) and reads
// the server's run_id, where one server answers for the master.
func (s *stream) dialPlain(c redis.UniversalClient) (link, string, error) {
	ctx := s.ctx // Close ends it
	if cc, ok := c.(*redis.ClusterClient); ok {
		for _, sc := range scriptList {
			if err := cc.ScriptLoad(ctx, sc.src).Err(); err != nil {
				return nil, "", fmt.Errorf("redlock: loading scripts: %w", err)
			}
		}
		return &plainLink{s: s, c: c}, "", nil // no single run_id
	}
	var info *redis.StringCmd
	var loads []*redis.StringCmd
	c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sc := range scriptList {
			loads = append(loads, p.ScriptLoad(ctx, sc.src))
		}
		info = p.Info(ctx, "server") // may fail (miniredis): no run_id to check then
		return nil
	})
	for _, l := range loads {
		if err := l.Err(); err != nil {
			if goredis.IsServerError(err) && aclRefusal(err.Error()) {
				err = refusedError("SCRIPT LOAD", err.Error())
			}
			return nil, "", fmt.Errorf("redlock: setting up %s: SCRIPT LOAD: %w", s.cfg.addr, err)
		}
	}
	if err := info.Err(); err != nil && goredis.IsServerError(err) && aclRefusal(err.Error()) {
		return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.addr, refusedError("INFO server", err.Error()))
	}
	runID := runIDOf(info.Val())
	if _, ok := c.(*redis.Ring); ok {
		runID = "" // INFO went to one shard of several
	}
	return &plainLink{s: s, c: c}, runID, nil
}

// write sends batch as one pipeline and answers its commands in order. An
// error that is not the server's reply (a network error, a timeout) breaks
// the link: the outcome of every command in the batch is then unknown.
func (p *plainLink) write(batch []*cmd) error {
	ctx := context.Background()
	cmds, err := goredis.Pipeline(ctx, p.c, len(batch), func(pp redis.Pipeliner, i int) *redis.Cmd {
		return plainCmd(ctx, pp, batch[i])
	})
	if err != nil {
		return err
	}
	now := p.s.cfg.env.now()
	for i := range batch {
		p.s.answer(p, plainRaw(cmds[i]), now)
	}
	return nil
}

// plainCmd queues c on p and returns what will hold its reply.
func plainCmd(ctx context.Context, p redis.Pipeliner, c *cmd) *redis.Cmd {
	var buf [16]arg
	list := c.args(buf[:0])
	args := make([]any, len(list))
	for i, a := range list {
		if a.num {
			args[i] = a.n // go-redis writes it in decimal
		} else {
			args[i] = a.s + a.suffix
		}
	}
	rc := redis.NewCmd(ctx, args...)
	p.Process(ctx, goredis.NoRetry{Cmd: rc})
	return rc
}

// plainRaw turns a go-redis command's result into the reply it was.
func plainRaw(c *redis.Cmd) raw {
	typ, n, text := goredis.Reply(c)
	if typ == '+' {
		text = ""
	}
	return raw{typ: typ, n: n, text: text}
}
