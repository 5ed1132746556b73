package clients_test

import (
	"crypto/tls"
	"testing"

	redigo "github.com/gomodule/redigo/redis"
	redlockredigo "github.com/quorumlab/redlock/adapters/redigo"
	redlockrueidis "github.com/quorumlab/redlock/adapters/rueidis"
	redlockvalkey "github.com/quorumlab/redlock/adapters/valkey"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"
)

// A kind is one way of giving the Locker its masters.
type kind struct {
	name    string
	masters func(t *testing.T, c *lab.Masters) []redlock.Master
}

var kinds = []kind{
	{"go-redis", func(t *testing.T, c *lab.Masters) []redlock.Master {
		var out []redlock.Master
		for _, cl := range c.Clients() {
			out = append(out, redlock.GoRedis(cl))
		}
		return out
	}},
	{"url", func(t *testing.T, c *lab.Masters) []redlock.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (redlock.Master, error) {
			if tc == nil {
				return redlock.ParseURL(c.URL(i))
			}
			o, err := redis.ParseURL(c.URL(i)) // rediss://, trusting the lab's CA
			if err != nil {
				return nil, err
			}
			o.TLSConfig = tc
			return redlock.FromOptions(o), nil
		})
	}},
	{"rueidis", func(t *testing.T, c *lab.Masters) []redlock.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (redlock.Master, error) {
			cl, err := rueidis.NewClient(rueidisOption(c, i, tc))
			if err != nil {
				return nil, err
			}
			t.Cleanup(cl.Close)
			return redlockrueidis.Master(cl)
		})
	}},
	{"rueidis-option", func(t *testing.T, c *lab.Masters) []redlock.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (redlock.Master, error) {
			return redlockrueidis.FromOption(rueidisOption(c, i, tc))
		})
	}},
	{"valkey-go", func(t *testing.T, c *lab.Masters) []redlock.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (redlock.Master, error) {
			user, pass := c.ACLUser()
			cl, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{c.Addrs()[i]}, Username: user, Password: pass, TLSConfig: tc, DisableCache: true})
			if err != nil {
				return nil, err
			}
			t.Cleanup(cl.Close)
			return redlockvalkey.Master(cl)
		})
	}},
	{"redigo", func(t *testing.T, c *lab.Masters) []redlock.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (redlock.Master, error) {
			user, pass := c.ACLUser()
			addr := c.Addrs()[i]
			p := &redigo.Pool{MaxIdle: 4, Dial: func() (redigo.Conn, error) {
				return redigo.Dial("tcp", addr, redigo.DialUseTLS(tc != nil), redigo.DialTLSConfig(tc),
					redigo.DialUsername(user), redigo.DialPassword(pass))
			}}
			t.Cleanup(func() { p.Close() })
			return redlockredigo.Master(p, addr)
		})
	}},
}

// perMaster makes one Master per master of c with m, given the lab's TLS
// config (nil without TLS).
func perMaster(t *testing.T, c *lab.Masters, m func(i int, tc *tls.Config) (redlock.Master, error)) []redlock.Master {
	t.Helper()
	out := make([]redlock.Master, c.N())
	for i := range out {
		var err error
		if out[i], err = m(i, c.TLSConfig()); err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
	}
	return out
}

func rueidisOption(c *lab.Masters, i int, tc *tls.Config) rueidis.ClientOption {
	user, pass := c.ACLUser()
	return rueidis.ClientOption{InitAddress: []string{c.Addrs()[i]}, Username: user, Password: pass, TLSConfig: tc, DisableCache: true}
}
