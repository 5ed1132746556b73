package clients_test

import (
	"crypto/tls"
	"testing"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	redlockredigo "github.com/quorumlab/redlock/adapters/redigo"
	redlockrueidis "github.com/quorumlab/redlock/adapters/rueidis"
	redlockvalkey "github.com/quorumlab/redlock/adapters/valkey"
	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/lab"
)

// A kind is one way of giving the Locker its masters.
type kind struct {
	name    string
	masters func(t *testing.T, c *lab.Masters) []driver.Master
}

var kinds = []kind{
	{"go-redis", func(t *testing.T, c *lab.Masters) []driver.Master {
		var out []driver.Master
		for _, cl := range c.Clients() {
			out = append(out, driver.GoRedis(cl.(*redis.Client).Options()))
		}
		return out
	}},
	{"url", func(t *testing.T, c *lab.Masters) []driver.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (driver.Master, error) {
			o, err := redis.ParseURL(c.URL(i))
			if err != nil {
				return nil, err
			}
			if tc != nil {
				o.TLSConfig = tc // rediss://, trusting the lab's CA
			}
			return driver.GoRedis(o), nil
		})
	}},
	{"rueidis", func(t *testing.T, c *lab.Masters) []driver.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (driver.Master, error) {
			cl, err := rueidis.NewClient(rueidisOption(c, i, tc))
			if err != nil {
				return nil, err
			}
			t.Cleanup(cl.Close)
			return redlockrueidis.Master(cl)
		})
	}},
	{"rueidis-option", func(t *testing.T, c *lab.Masters) []driver.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (driver.Master, error) {
			return redlockrueidis.FromOption(rueidisOption(c, i, tc))
		})
	}},
	{"valkey-go", func(t *testing.T, c *lab.Masters) []driver.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (driver.Master, error) {
			user, pass := c.ACLUser()
			cl, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{c.Addrs()[i]}, Username: user, Password: pass, TLSConfig: tc, DisableCache: true})
			if err != nil {
				return nil, err
			}
			t.Cleanup(cl.Close)
			return redlockvalkey.Master(cl)
		})
	}},
	{"redigo", func(t *testing.T, c *lab.Masters) []driver.Master {
		return perMaster(t, c, func(i int, tc *tls.Config) (driver.Master, error) {
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
func perMaster(t *testing.T, c *lab.Masters, m func(i int, tc *tls.Config) (driver.Master, error)) []driver.Master {
	t.Helper()
	out := make([]driver.Master, c.N())
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
