package redlock

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Master is one Redis master, for NewMasters. GoRedis, FromOptions and
// ParseURL make one from a go-redis client, its options or a redis:// URL;
// the adapters (modules under adapters/: rueidis, valkey-go, redigo) make
// one from another client. The Locker only ever sends it generic command
// lines (SET, EVALSHA, SCRIPT LOAD, ZADD, ...): a Master need not know
// what they are for, nor handle NOSCRIPT (the Locker loads its scripts
// again and resends).
//
// A Master that is not a go-redis one gets the client path: the Locker
// calls Do with one batch at a time per master, in order, so a release is
// never sent before the SET it cleans up. A master that stalls holds its
// batch until Do returns (the Locker bounds it with the context, see
// ClientTimeout); rounds do not wait for it longer than MasterTimeout, and
// nothing new is sent to it meanwhile (docs/design.md §10).
type Master interface {
	// Do sends cmds, in order, as one pipeline, and returns one reply per
	// command, in order. An error reply from the server is a Reply of
	// kind ReplyError, not an error; an error means the outcome of the
	// batch is unknown (a network error, ctx ended).
	Do(ctx context.Context, cmds [][]string) ([]Reply, error)
	// Addr names the master in Stats, MasterResult and errors, and two
	// masters with the same non-empty Addr are refused as one.
	Addr() string
}

// ReplyKind is the RESP type of a Reply.
type ReplyKind uint8

// The kinds of reply a Master returns. RESP3 types map to the nearest
// RESP2 one: a verbatim string is ReplyBulk, a map or set ReplyOther.
const (
	ReplyNil    ReplyKind = iota // a null (nil bulk, nil array, RESP3 null)
	ReplyStatus                  // a simple string, such as OK
	ReplyError                   // an error reply; Text is as the server sent it ("NOSCRIPT ...")
	ReplyInt                     // an integer, in Int
	ReplyBulk                    // a bulk or verbatim string, in Text (a client that cannot tell may give a simple string as one)
	ReplyOther                   // anything else (arrays, maps, ...)
)

// Reply is one reply of a Master's Do.
type Reply struct {
	Kind ReplyKind
	Int  int64
	Text string
}

// ClientTimeout bounds one Do on the client path (or MasterTimeout, when
// that is longer): past it the batch's
// outcome is unknown, and the Locker reconnects (calls Do again with its
// scripts) before it sends anything else to that master. It plays the role
// of go-redis's default ReadTimeout on the go-redis plain path.
const ClientTimeout = 3 * time.Second

// goRedisMaster is a go-redis client as a Master; New's clients become
// these. The Locker recognises it and picks the go-redis paths
// (transport.go) rather than calling Do.
type goRedisMaster struct {
	c   redis.UniversalClient
	own bool // made by FromOptions or ParseURL: the Locker closes it
}

// GoRedis returns c as a Master, for NewMasters: it takes the same path as
// in New (the fast path for a *redis.Client whose options the Locker can
// reproduce, see New).
func GoRedis(c redis.UniversalClient) Master { return &goRedisMaster{c: c} }

// FromOptions returns a Master on the fast path from go-redis options
// (address, TLS, user, password, DB, dialer): the Locker opens its own
// connection with them, and closes everything it opened at Close. An
// adapter whose client's options can be read uses it.
func FromOptions(o *redis.Options) Master {
	return &goRedisMaster{c: redis.NewClient(o), own: true}
}

// ParseURL returns a Master on the fast path from a redis:// or rediss://
// URL (user, password, DB and TLS as in the URL; the query parameters of
// go-redis's ParseURL). An error wraps ErrInvalid.
func ParseURL(url string) (Master, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return FromOptions(o), nil
}

// NewFromURLs is NewMasters over the masters at urls (ParseURL): no
// client of the caller's is needed, and every master is on the fast path.
func NewFromURLs(urls []string, opts *Options) (*Locker, error) {
	ms := make([]Master, len(urls))
	for i, u := range urls {
		m, err := ParseURL(u)
		if err != nil {
			closeOwned(ms[:i])
			return nil, fmt.Errorf("redlock: master %d: %w", i, err)
		}
		ms[i] = m
	}
	l, err := NewMasters(ms, opts)
	if err != nil {
		closeOwned(ms)
	}
	return l, err
}

// closeOwned closes the go-redis clients the Locker made itself.
func closeOwned(ms []Master) {
	for _, m := range ms {
		if g, ok := m.(*goRedisMaster); ok && g.own {
			g.c.Close()
		}
	}
}

// Do runs cmds as one go-redis pipeline through the client, so that a
// go-redis client can serve wherever a Master is asked for.
func (g *goRedisMaster) Do(ctx context.Context, cmds [][]string) ([]Reply, error) {
	rc, err := pipeline(ctx, g.c, len(cmds), func(p redis.Pipeliner, i int) *redis.Cmd {
		args := make([]any, len(cmds[i]))
		for j, a := range cmds[i] {
			args[j] = a
		}
		c := redis.NewCmd(ctx, args...)
		p.Process(ctx, noRetry{c})
		return c
	})
	if err != nil {
		return nil, err
	}
	out := make([]Reply, len(rc))
	for i, c := range rc {
		out[i] = replyOf(plainRaw(c))
	}
	return out, nil
}

// Addr is the client's address (several, comma-separated, for a cluster).
func (g *goRedisMaster) Addr() string { return clientAddr(g.c) }

// replyOf and rawOf convert between a Master's replies and the
// transports' (cmd.go).
func replyOf(r raw) Reply {
	switch r.typ {
	case '_':
		return Reply{Kind: ReplyNil}
	case '+':
		return Reply{Kind: ReplyStatus, Text: "OK"}
	case '-':
		return Reply{Kind: ReplyError, Text: r.text}
	case ':':
		return Reply{Kind: ReplyInt, Int: r.n}
	case '$':
		return Reply{Kind: ReplyBulk, Text: r.text}
	}
	return Reply{Kind: ReplyOther}
}

func rawOf(r Reply) raw {
	switch r.Kind {
	case ReplyNil:
		return raw{typ: '_'}
	case ReplyStatus:
		return raw{typ: '+', text: r.Text}
	case ReplyError:
		return raw{typ: '-', text: r.Text}
	case ReplyInt:
		return raw{typ: ':', n: r.Int}
	case ReplyBulk:
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
	m Master
}

func (k *clientLink) direct() bool { return false }
func (k *clientLink) close()       {}

// newClientPath is the path to a Master that is not a go-redis client.
func newClientPath(cfg *pathConfig, m Master) pathway {
	var s *stream
	s = newStream(cfg, func() (link, string, error) { return s.dialClient(m) }, 0)
	return s
}

// dialClient loads the scripts and reads the server's run_id, in one
// batch bounded by ClientTimeout.
func (s *stream) dialClient(m Master) (link, string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, ClientTimeout) // Close ends it too
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
		if r.Kind == ReplyError {
			return nil, "", fmt.Errorf("redlock: setting up %s: %w", s.cfg.addr, handshakeError("SCRIPT LOAD", r.Text))
		}
	}
	info := reps[len(scriptList)]
	if info.Kind == ReplyError && aclRefusal(info.Text) {
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
	ctx, cancel := context.WithTimeout(k.s.ctx, max(ClientTimeout, k.s.cfg.nodeTimeout))
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
func masterAddr(m Master) string {
	if g, ok := m.(*goRedisMaster); ok {
		return clientAddr(g.c)
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
