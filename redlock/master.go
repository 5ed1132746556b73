package redlock

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/goredis"
)

// goRedisClient is what a go-redis Master (driver.GoRedis, or the ones New
// and NewFromURLs make) has: the Locker takes the go-redis paths
// (transport.go) for it rather than calling Do.
type goRedisClient interface {
	GoRedisClient() redis.UniversalClient
}

// goRedisMaster is a go-redis client of the caller's as a Master, made by
// New. The Locker does not close it.
type goRedisMaster struct{ c redis.UniversalClient }

func (g *goRedisMaster) GoRedisClient() redis.UniversalClient { return g.c }
func (g *goRedisMaster) Addr() string                         { return goredis.Addr(g.c) }

// Do runs cmds as one go-redis pipeline through the client. The Locker
// recognises the client and never calls it; a wrapper of the Master
// (a test's) does.
func (g *goRedisMaster) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	rc, err := goredis.Run(ctx, g.c, cmds)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Reply, len(rc))
	for i, c := range rc {
		out[i] = replyOf(plainRaw(c))
	}
	return out, nil
}

// replyOf and rawOf convert between a Master's replies and the
// transports' (cmd.go).
func replyOf(r raw) driver.Reply {
	switch r.typ {
	case '_':
		return driver.Reply{Kind: driver.ReplyNil}
	case '+':
		return driver.Reply{Kind: driver.ReplyStatus, Text: "OK"}
	case '-':
		return driver.Reply{Kind: driver.ReplyError, Text: r.text}
	case ':':
		return driver.Reply{Kind: driver.ReplyInt, Int: r.n}
	case '$':
		return driver.Reply{Kind: driver.ReplyBulk, Text: r.text}
	}
	return driver.Reply{Kind: driver.ReplyOther}
}

// NewFromURLs is New over the masters at redis:// or rediss:// urls (user,
// password, DB and TLS as in the URL; the query parameters of go-redis's
// ParseURL): the Locker makes a client for each, every master on the
// fast path, and Close closes them. An unparsable URL is ErrInvalid.
func NewFromURLs(urls []string, opts *Options) (*Locker, error) {
	ms := make([]driver.Master, len(urls))
	for i, u := range urls {
		o, err := redis.ParseURL(u)
		if err != nil {
			closeOwned(ms[:i])
			return nil, fmt.Errorf("redlock: master %d: %w: %w", i, ErrInvalid, err)
		}
		ms[i] = driver.GoRedis(o)
	}
	l, err := NewMasters(ms, opts)
	if err != nil {
		closeOwned(ms)
	}
	return l, err
}

// closeOwned closes the go-redis clients the Locker made itself: those of
// driver.GoRedis (New's are the caller's).
func closeOwned(ms []driver.Master) {
	for _, m := range ms {
		if _, caller := m.(*goRedisMaster); caller {
			continue
		}
		if g, ok := m.(goRedisClient); ok && g.GoRedisClient() != nil {
			g.GoRedisClient().Close()
		}
	}
}

func rawOf(r driver.Reply) raw {
	switch r.Kind {
	case driver.ReplyNil:
		return raw{typ: '_'}
	case driver.ReplyStatus:
		return raw{typ: '+', text: r.Text}
	case driver.ReplyError:
		return raw{typ: '-', text: r.Text}
	case driver.ReplyInt:
		return raw{typ: ':', n: r.Int}
	case driver.ReplyBulk:
		if r.Text == "OK" {
			// A client that does not tell a simple string from a bulk
			// one (rueidis, valkey-go): no command of the Locker's
			// answers a bulk OK, SET answers the status OK.
			return raw{typ: '+', text: r.Text}
		}
		return raw{typ: '$', text: r.Text}
	}
	return raw{typ: '*'}
}

// The client path: a Master that is not a go-redis client. The stream's
// flusher hands each batch to Do, one batch at a time, so order is kept,
// as on the go-redis plain path (plain.go).

type clientLink struct {
	s *stream
	m driver.Master
}

func (k *clientLink) direct() bool { return false }
func (k *clientLink) close()       {}

// newClientPath is the path to a Master that is not a go-redis client.
func newClientPath(cfg *pathConfig, m driver.Master) pathway {
	var s *stream
	s = newStream(cfg, func() (link, string, error) { return s.dialClient(m) }, 0)
	return s
}

// dialClient loads the scripts and reads the server's run_id, in one
// batch bounded by ClientTimeout.
func (s *stream) dialClient(m driver.Master) (link, string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, driver.ClientTimeout) // Close ends it too
	defer cancel()
	cmds := make([][]string, 0, len(scriptList)+1)
	for _, sc := range scriptList {
		cmds = append(cmds, []string{"SCRIPT", "LOAD", sc.src})
	}
	cmds = append(cmds, []string{"INFO", "server"})
	reps, err := m.Do(ctx, cmds)
	if err == nil && len(reps) != len(cmds) {
		err = fmt.Errorf("%w: %d replies to %d commands", errUnexpected, len(reps), len(cmds))
	}
	if err != nil {
		return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.addr, err)
	}
	for _, r := range reps[:len(scriptList)] {
		if r.Kind == driver.ReplyError {
			return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.addr, handshakeError("SCRIPT LOAD", r.Text))
		}
	}
	info := reps[len(scriptList)]
	if info.Kind == driver.ReplyError && aclRefusal(info.Text) {
		return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.addr, refusedError("INFO server", info.Text))
	}
	return &clientLink{s: s, m: m}, runIDOf(info.Text), nil // no INFO (miniredis): no run_id to check
}

// write sends batch through Do and answers its commands in order. An
// error (the outcome unknown) breaks the link, as on the plain path.
func (k *clientLink) write(batch []*cmd) error {
	cmds := make([][]string, len(batch))
	var buf [16]arg
	for i, c := range batch {
		list := c.args(buf[:0])
		line := make([]string, len(list))
		for j, a := range list {
			line[j] = a.String()
		}
		cmds[i] = line
	}
	ctx, cancel := context.WithTimeout(k.s.ctx, max(driver.ClientTimeout, k.s.cfg.nodeTimeout))
	reps, err := k.m.Do(ctx, cmds)
	cancel()
	if err == nil && len(reps) != len(batch) {
		err = fmt.Errorf("%w: %d replies to %d commands", errUnexpected, len(reps), len(batch))
	}
	if err != nil {
		return err
	}
	now := k.s.cfg.env.now()
	for i := range batch {
		k.s.answer(k, rawOf(reps[i]), now)
	}
	return nil
}

// masterAddr names m for NewMasters.
func masterAddr(m driver.Master) string {
	if g, ok := m.(goRedisClient); ok {
		return goredis.Addr(g.GoRedisClient())
	}
	return strings.ToLower(m.Addr())
}

// serverName is addr ("host:port") as New compares masters: one name per
// server where the name alone says so, without a lookup (New contacts
// nothing): IP literals in one form, a port without leading zeros, and
// every name of this host's loopback server, "localhost" (RFC 6761: its
// names are loopback addresses), an empty host, 127.0.0.1, ::1 and the
// unspecified addresses, as one. Other names for one server (DNS names,
// a dialer of the caller's) are caught by run_id on first contact.
func serverName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if p, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(p, 10)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap().WithZone("")
		host = ip.String()
		if ip.IsUnspecified() || ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || ip == netip.IPv6Loopback() {
			host = "localhost"
		}
	}
	if host == "" || strings.HasSuffix(host, ".localhost") {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
