package redlock

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/goredis"
	"github.com/quorumlab/redlock/internal/transport"
)

// goRedisClient is what a go-redis Master (driver.GoRedis, or the ones New
// and NewFromURLs make) has: the Locker takes the go-redis paths
// (transport.NewPath) for it rather than calling Do.
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
		out[i] = transport.GoRedisReply(c)
	}
	return out, nil
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

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
