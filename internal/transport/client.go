package transport

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// The client path: a Master that is not a go-redis client. The stream's
// flusher hands each batch to Do, one batch at a time, so order is kept,
// as on the go-redis plain path (plain.go).

type clientLink struct {
	s    *Stream
	m    driver.Master
	args []Arg // scratch for a command's args (the flusher's)
}

func (k *clientLink) Direct() bool { return false }
func (k *clientLink) Close()       {}

// dialClient loads the scripts and reads the server's run_id, in one
// batch bounded by ClientTimeout.
func (s *Stream) dialClient(m driver.Master) (Link, string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, driver.ClientTimeout) // Close ends it too
	defer cancel()
	proto := s.cfg.Proto
	cmds := make([][]string, 0, len(proto.Scripts)+1)
	for _, src := range proto.Scripts {
		cmds = append(cmds, []string{"SCRIPT", "LOAD", src})
	}
	cmds = append(cmds, []string{"INFO", "server"})
	reps, err := m.Do(ctx, cmds)
	if err == nil && len(reps) != len(cmds) {
		err = fmt.Errorf("%w: %d replies to %d commands", ErrUnexpected, len(reps), len(cmds))
	}
	if err != nil {
		return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.Addr, err)
	}
	for _, r := range reps[:len(proto.Scripts)] {
		if r.Kind == driver.ReplyError {
			return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.Addr, proto.setupError("SCRIPT LOAD", r.Text))
		}
	}
	info := reps[len(proto.Scripts)]
	if info.Kind == driver.ReplyError {
		if ref := proto.Refusal("INFO server", info.Text); ref != nil {
			return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.Addr, ref)
		}
	}
	return &clientLink{s: s, m: m}, runIDOf(info.Text), nil // no INFO (miniredis): no run_id to check
}

// Write sends batch through Do and answers its commands in order. An
// error (the outcome unknown) breaks the link, as on the plain path.
func (k *clientLink) Write(batch []Command) error {
	cmds := make([][]string, len(batch))
	for i, c := range batch {
		list := c.Args(k.args[:0])
		line := make([]string, len(list))
		for j, a := range list {
			line[j] = a.String()
		}
		cmds[i] = line
		clear(list) // keep no keys or tokens alive
		k.args = list
	}
	ctx, cancel := context.WithTimeout(k.s.ctx, max(driver.ClientTimeout, k.s.cfg.NodeTimeout))
	reps, err := k.m.Do(ctx, cmds)
	cancel()
	if err == nil && len(reps) != len(batch) {
		err = fmt.Errorf("%w: %d replies to %d commands", ErrUnexpected, len(reps), len(batch))
	}
	if err != nil {
		return err
	}
	now := k.s.cfg.Env.Now()
	for i := range batch {
		k.s.Answer(k, RawOf(reps[i]), now)
	}
	return nil
}

// GoRedisReply is a go-redis command's result as a Master's reply (a
// go-redis client's Do).
func GoRedisReply(c *redis.Cmd) driver.Reply { return replyOf(plainRaw(c)) }

// replyOf and RawOf convert between a Master's replies and the links'.
func replyOf(r Raw) driver.Reply {
	switch r.Type {
	case '_':
		return driver.Reply{Kind: driver.ReplyNil}
	case '+':
		return driver.Reply{Kind: driver.ReplyStatus, Text: "OK"}
	case '-':
		return driver.Reply{Kind: driver.ReplyError, Text: r.Text}
	case ':':
		return driver.Reply{Kind: driver.ReplyInt, Int: r.N}
	case '$':
		return driver.Reply{Kind: driver.ReplyBulk, Text: r.Text}
	}
	return driver.Reply{Kind: driver.ReplyOther}
}

// RawOf is a Master's reply r as the links read replies.
func RawOf(r driver.Reply) Raw {
	switch r.Kind {
	case driver.ReplyNil:
		return Raw{Type: '_'}
	case driver.ReplyStatus:
		return Raw{Type: '+', Text: r.Text}
	case driver.ReplyError:
		return Raw{Type: '-', Text: r.Text}
	case driver.ReplyInt:
		return Raw{Type: ':', N: r.Int}
	case driver.ReplyBulk:
		if r.Text == "OK" {
			// A client that does not tell a simple string from a bulk
			// one (rueidis, valkey-go): no command of the Locker's
			// answers a bulk OK, SET answers the status OK.
			return Raw{Type: '+', Text: r.Text}
		}
		return Raw{Type: '$', Text: r.Text}
	}
	return Raw{Type: '*'}
}
