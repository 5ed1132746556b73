// Package redlockredigo makes redigo pools masters of a redlock.Locker.
//
// Master sends the Locker's commands through a redigo pool (the client
// path): each batch takes a connection from the pool, sends every
// command, flushes once and reads the replies. A pool's Dial function
// cannot be read, so there is no fast path from a pool; give the Locker
// the master's URL instead (redlock.ParseURL) for that. docs/design.md
// §10 compares the two.
//
// This is a module of its own: importing redlock alone never loads
// redigo.
package redlockredigo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Master returns p, a pool of connections to one Redis master, as a
// driver.Master on the client path, which also carries the
// wake-on-release subscription. addr, the address the pool dials, names
// the master in the Locker's stats and errors, and lets redlock.New refuse
// one server named twice; it must not be empty (a pool's Dial function
// cannot be read for it). The pool stays the caller's to close, after the
// Locker.
func Master(p *redis.Pool, addr string) (driver.Subscriber, error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: nil redigo pool", redlock.ErrInvalid)
	case strings.TrimSpace(addr) == "":
		return nil, fmt.Errorf("%w: empty address (pass the host:port the pool dials)", redlock.ErrInvalid)
	}
	return &master{p: p, addr: addr}, nil
}

type master struct {
	p    *redis.Pool
	addr string
}

func (m *master) Addr() string { return m.addr }

// Do pipelines cmds on one pooled connection. A connection whose reply
// was not read (an error other than the server's) is closed by the pool
// rather than reused: its replies would be out of step.
func (m *master) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	conn, err := m.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, line := range cmds {
		args := make([]any, len(line)-1)
		for i, a := range line[1:] {
			args[i] = a
		}
		if err := conn.Send(line[0], args...); err != nil {
			return nil, err
		}
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	out := make([]driver.Reply, len(cmds))
	for i := range cmds {
		v, err := redis.ReceiveContext(conn, ctx)
		var re redis.Error
		switch {
		case errors.As(err, &re):
			out[i] = driver.Reply{Kind: driver.ReplyError, Text: re.Error()}
			continue
		case err != nil:
			return nil, err
		}
		switch v := v.(type) {
		case nil:
			out[i] = driver.Reply{Kind: driver.ReplyNil}
		case int64:
			out[i] = driver.Reply{Kind: driver.ReplyInt, Int: v}
		case string:
			out[i] = driver.Reply{Kind: driver.ReplyStatus, Text: v}
		case []byte:
			out[i] = driver.Reply{Kind: driver.ReplyBulk, Text: string(v)}
		default:
			out[i] = driver.Reply{Kind: driver.ReplyOther}
		}
	}
	return out, nil
}

// Subscribe opens a connection of its own (the pool's Dial, not a pooled
// one) for the Locker's wake-on-release subscription
// (driver.Subscriber), read by one goroutine until Close.
func (m *master) Subscribe(ctx context.Context, deliver func(channel, payload string)) (driver.Subscription, error) {
	var conn redis.Conn
	var err error
	switch {
	case m.p.DialContext != nil:
		conn, err = m.p.DialContext(ctx)
	case m.p.Dial != nil:
		conn, err = m.p.Dial()
	default:
		return nil, errors.New("redlockredigo: the pool has no Dial function")
	}
	if err != nil {
		return nil, err
	}
	s := &subscription{psc: redis.PubSubConn{Conn: conn}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			switch v := s.psc.Receive().(type) {
			case redis.Message:
				deliver(v.Channel, string(v.Data))
			case error:
				return // closed, or broken: the next Subscribe fails and the Locker opens another
			}
		}
	}()
	return s, nil
}

type subscription struct {
	psc  redis.PubSubConn
	done chan struct{} // the reader has returned
}

func (s *subscription) Subscribe(_ context.Context, channels ...string) error {
	return s.psc.Subscribe(redis.Args{}.AddFlat(channels)...)
}

func (s *subscription) Unsubscribe(_ context.Context, channels ...string) error {
	return s.psc.Unsubscribe(redis.Args{}.AddFlat(channels)...)
}

// Close closes the connection and waits for its reader.
func (s *subscription) Close() error {
	err := s.psc.Conn.Close()
	<-s.done
	return err
}
