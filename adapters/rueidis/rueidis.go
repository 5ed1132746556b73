// Package redlockrueidis makes rueidis clients masters of a redlock.Locker.
//
// Master sends the Locker's commands through a rueidis client (the client
// path: its own connection and automatic pipelining). FromOption gives the
// fast path instead (the Locker's own pipelined connection per master)
// when the options say everything about how to connect. docs/design.md
// §10 compares the two.
//
// This is a module of its own: importing redlock alone never loads
// rueidis.
package redlockrueidis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Master returns c, a standalone or Sentinel rueidis client of one Redis
// master, as a driver.Master on the client path, which also carries the
// wake-on-release subscription (on a dedicated connection of c's). A cluster client is
// refused (ErrInvalid): the adapter does not route by key, and a lock needs
// independent masters anyway. The client stays the caller's to close,
// after the Locker.
func Master(c rueidis.Client) (driver.Subscriber, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", redlock.ErrInvalid)
	}
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, fmt.Errorf("%w: a rueidis cluster client as one master (give one client per independent master)", redlock.ErrInvalid)
	}
	addrs := make([]string, 0, 1)
	for a := range c.Nodes() {
		addrs = append(addrs, a)
	}
	return &master{c: c, addr: strings.Join(addrs, ",")}, nil
}

type master struct {
	c    rueidis.Client
	addr string
}

func (m *master) Addr() string { return m.addr }

// Do sends cmds with one DoMulti, which rueidis pipelines with whatever
// else is in flight on the connection.
func (m *master) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	cc := make(rueidis.Commands, len(cmds))
	for i, line := range cmds {
		cc[i] = m.c.B().Arbitrary(line...).Build()
	}
	res := m.c.DoMulti(ctx, cc...)
	out := make([]driver.Reply, len(res))
	for i, r := range res {
		if err := r.NonRedisError(); err != nil {
			return nil, err
		}
		msg, _ := r.ToMessage()
		out[i] = reply(&msg)
	}
	return out, nil
}

// reply reads one rueidis message. rueidis does not tell a simple string
// from a bulk one: both are ReplyBulk, which the Locker reads alike.
func reply(m *rueidis.RedisMessage) driver.Reply {
	var re *rueidis.RedisError
	switch err := m.Error(); {
	case rueidis.IsRedisNil(err):
		return driver.Reply{Kind: driver.ReplyNil}
	case errors.As(err, &re):
		return driver.Reply{Kind: driver.ReplyError, Text: re.Error()}
	}
	if m.IsInt64() {
		n, _ := m.AsInt64()
		return driver.Reply{Kind: driver.ReplyInt, Int: n}
	}
	if m.IsArray() || m.IsMap() {
		return driver.Reply{Kind: driver.ReplyOther}
	}
	s, err := m.ToString()
	if err != nil {
		return driver.Reply{Kind: driver.ReplyOther}
	}
	return driver.Reply{Kind: driver.ReplyBulk, Text: s}
}

// FromOption returns a driver.Master on the fast path for the one master
// opt names: its address, TLS config, user, password, DB and dialer. It
// fails, wrapping ErrInvalid, for options the Locker cannot reproduce (not
// exactly one address, Sentinel, a credentials function): build the
// client and use Master then.
func FromOption(opt rueidis.ClientOption) (driver.Master, error) {
	switch {
	case len(opt.InitAddress) != 1:
		return nil, fmt.Errorf("%w: the fast path needs exactly one address, got %d", redlock.ErrInvalid, len(opt.InitAddress))
	case opt.Sentinel.MasterSet != "":
		return nil, fmt.Errorf("%w: Sentinel options need the client path (Master)", redlock.ErrInvalid)
	case opt.AuthCredentialsFn != nil:
		return nil, fmt.Errorf("%w: a credentials function needs the client path (Master)", redlock.ErrInvalid)
	}
	o := &redis.Options{
		Addr:        opt.InitAddress[0],
		Username:    opt.Username,
		Password:    opt.Password,
		DB:          opt.SelectDB,
		TLSConfig:   opt.TLSConfig,
		DialTimeout: opt.Dialer.Timeout,
	}
	if dial, dialCtx, d := opt.DialFn, opt.DialCtxFn, opt.Dialer; dial != nil || dialCtx != nil {
		o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			if dialCtx != nil {
				return dialCtx(ctx, addr, &d, opt.TLSConfig)
			}
			return dial(addr, &d, opt.TLSConfig)
		}
	}
	return driver.GoRedis(o), nil
}

// ParseURL is FromOption(rueidis.ParseURL(url)).
func ParseURL(url string) (driver.Master, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", redlock.ErrInvalid, err)
	}
	return FromOption(opt)
}

// Subscribe opens a dedicated connection for the Locker's wake-on-release
// subscription (driver.Subscriber): waiters are woken by the release.
func (m *master) Subscribe(_ context.Context, deliver func(channel, payload string)) (driver.Subscription, error) {
	dc, cancel := m.c.Dedicate()
	dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(msg rueidis.PubSubMessage) { deliver(msg.Channel, msg.Message) }})
	return &subscription{dc: dc, cancel: cancel}, nil
}

type subscription struct {
	dc     rueidis.DedicatedClient
	cancel func()
}

func (s *subscription) Subscribe(ctx context.Context, channels ...string) error {
	return s.dc.Do(ctx, s.dc.B().Subscribe().Channel(channels...).Build()).Error()
}

func (s *subscription) Unsubscribe(ctx context.Context, channels ...string) error {
	return s.dc.Do(ctx, s.dc.B().Unsubscribe().Channel(channels...).Build()).Error()
}

func (s *subscription) Close() error { s.cancel(); return nil }
