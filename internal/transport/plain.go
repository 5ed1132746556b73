package transport

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
	s    *Stream
	c    redis.UniversalClient
	args []Arg // scratch for a command's args (the flusher's)
}

func (p *plainLink) Direct() bool { return false }
func (p *plainLink) Close()       {}

// dialPlain loads the scripts (on every shard, for a cluster) and reads
// the server's run_id, where one server answers for the master.
func (s *Stream) dialPlain(c redis.UniversalClient) (Link, string, error) {
	ctx := s.ctx // Close ends it
	proto := s.cfg.Proto
	if cc, ok := c.(*redis.ClusterClient); ok {
		for _, src := range proto.Scripts {
			if err := cc.ScriptLoad(ctx, src).Err(); err != nil {
				return nil, "", fmt.Errorf("redlock: loading scripts: %w", err)
			}
		}
		return &plainLink{s: s, c: c}, "", nil // no single run_id
	}
	var info *redis.StringCmd
	var loads []*redis.StringCmd
	c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, src := range proto.Scripts {
			loads = append(loads, p.ScriptLoad(ctx, src))
		}
		info = p.Info(ctx, "server") // may fail (miniredis): no run_id to check then
		return nil
	})
	for _, l := range loads {
		if err := l.Err(); err != nil {
			if goredis.IsServerError(err) {
				if ref := proto.Refusal("SCRIPT LOAD", err.Error()); ref != nil {
					err = ref
				}
			}
			return nil, "", fmt.Errorf("redlock: setting up %s: SCRIPT LOAD: %w", s.cfg.Addr, err)
		}
	}
	if err := info.Err(); err != nil && goredis.IsServerError(err) {
		if ref := proto.Refusal("INFO server", err.Error()); ref != nil {
			return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.Addr, ref)
		}
	}
	runID := runIDOf(info.Val())
	if _, ok := c.(*redis.Ring); ok {
		runID = "" // INFO went to one shard of several
	}
	return &plainLink{s: s, c: c}, runID, nil
}

// Write sends batch as one pipeline and answers its commands in order. An
// error that is not the server's reply (a network error, a timeout) breaks
// the link: the outcome of every command in the batch is then unknown.
func (p *plainLink) Write(batch []Command) error {
	ctx := context.Background()
	cmds, err := goredis.Pipeline(ctx, p.c, len(batch), func(pp redis.Pipeliner, i int) *redis.Cmd {
		var rc *redis.Cmd
		rc, p.args = plainCmd(ctx, pp, batch[i], p.args)
		return rc
	})
	if err != nil {
		return err
	}
	now := p.s.cfg.Env.Now()
	for i := range batch {
		p.s.Answer(p, plainRaw(cmds[i]), now)
	}
	return nil
}

// plainCmd queues c on p and returns what will hold its reply, and
// scratch, which held c's args, to use again.
func plainCmd(ctx context.Context, p redis.Pipeliner, c Command, scratch []Arg) (*redis.Cmd, []Arg) {
	list := c.Args(scratch[:0])
	args := make([]any, len(list))
	for i, a := range list {
		if a.num {
			args[i] = a.n // go-redis writes it in decimal
		} else {
			args[i] = a.s + a.suffix
		}
	}
	clear(list) // keep no keys or tokens alive
	rc := redis.NewCmd(ctx, args...)
	p.Process(ctx, goredis.NoRetry{Cmd: rc})
	return rc, list
}

// plainRaw turns a go-redis command's result into the reply it was.
func plainRaw(c *redis.Cmd) Raw {
	typ, n, text := goredis.Reply(c)
	if typ == '+' {
		text = ""
	}
	return Raw{Type: typ, N: n, Text: text}
}
