package lab

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultACLRules are the ACL rules Options.ACLUser gets by default: what
// package redlock needs on a lock master whose keys start with "redlock:"
// (its default KeyPrefix), and nothing else. The README's "TLS and ACL"
// section gives the same line; tests/tlsacl checks every entry. In order:
//
//   - resetkeys ~redlock:*: only keys under the prefix (lock keys and their
//     ":fence" counters).
//   - resetchannels &redlock:*: only channels under the prefix (releases
//     announce on a channel named like the lock key).
//   - -@all, then the commands: SET (acquire), EVALSHA and SCRIPT LOAD (the
//     scripts, loaded on every connection), INFO (the server's run_id,
//     which tells two names of one server apart), and the commands the
//     scripts call, which Redis checks against the caller's ACL: GET, DEL,
//     PEXPIRE, HGET, HSET, EXISTS, PUBLISH. SUBSCRIBE, UNSUBSCRIBE and PING
//     are for waiters listening for releases on a dedicated connection;
//     ZADD, ZREM and ZPOPMIN for the waiters' queue beside the lock key
//     (joined and left by waiters, popped by the release script), whose
//     waiters poll with PTTL, which also dates a holder's expiry.
//     A release hands the key itself to a waiting Locker's caller whose
//     queue entry carries its token, with SET, once PUBSUB NUMSUB says
//     that caller's Locker listens (redlock's docs/design.md §14.3).
//     ZREMRANGEBYSCORE, ZCARD, ZCOUNT, ZSCORE, PTTL and
//     TIME for the read-write lock's readers, a sorted set that its
//     scripts expire by the master's clock (redlock's docs/design.md §19);
//     TIME also scores a waiter's join of the queue by the master's clock
//     (§14.1), and without it the queue is skipped as without ZADD.
//     The queue's key is the lock key + ":waiters", and a release names a
//     waiter on the channel lock key + ":w:" + the waiter's Locker id.
//     CLIENT ID and CLIENT KILL let a new connection end the one it
//     replaces on the server (redlock's docs/design.md §10); without them
//     the Locker works and warns once per master.
//
// AUTH and HELLO need no permission; CLIENT SETINFO, which go-redis sends
// when it connects, does not exist before Redis 7.2 and its refusal is
// ignored, so it is not listed (add +client|setinfo on 7.2 and later to
// keep the library name in CLIENT LIST).
const DefaultACLRules = "resetkeys ~redlock:* resetchannels &redlock:* -@all " +
	"+set +evalsha +script|load +info +get +del +pexpire +hget +hset +exists +zadd +zrem +zpopmin +zrank +zremrangebyscore +zcard +zcount +zscore +pttl +time +publish +pubsub|numsub +subscribe +unsubscribe +ping +client|id +client|kill"

// ErrNeedsProcessBackend is returned by Start when Options.TLS or
// Options.ACLUser is asked of the Docker backend (including through
// $REDLOCK_LAB_BACKEND): they are set up on the Process backend only.
var ErrNeedsProcessBackend = errors.New("lab: Options.TLS and Options.ACLUser need the Process backend (the Docker backend does not support them)")

// security is what Options.TLS and Options.ACLUser make of the masters.
type security struct {
	tls       *tlsFiles // nil without Options.TLS
	user      string    // "" without Options.ACLUser
	pass      string
	rules     []string
	adminPass string // the default user's password when user is set
}

// newSecurity checks the TLS and ACL options; the TLS files are made later,
// in the backend's directory.
func newSecurity(o *Options) (*security, error) {
	s := &security{}
	if o.ACLUser == "" {
		if o.ACLPassword != "" || o.ACLRules != "" {
			return nil, errors.New("lab: ACLPassword and ACLRules need ACLUser")
		}
		return s, nil
	}
	if o.ACLUser == "default" || strings.ContainsAny(o.ACLUser, " \t\r\n") {
		return nil, fmt.Errorf("lab: ACLUser %q: want a name other than \"default\" (the lab's admin), without spaces", o.ACLUser)
	}
	s.user, s.pass = o.ACLUser, o.ACLPassword
	if s.pass == "" {
		s.pass = randomPassword()
	}
	if strings.ContainsAny(s.pass, " \t\r\n") {
		return nil, errors.New("lab: ACLPassword must not contain spaces")
	}
	rules := o.ACLRules
	if rules == "" {
		rules = DefaultACLRules
	}
	s.rules = strings.Fields(rules)
	s.adminPass = randomPassword()
	return s, nil
}

func randomPassword() string {
	return rand.Text() // 26 base32 characters, 130 bits
}

// serverArgs are the redis-server flags for TLS on port (or plain TCP) and
// the ACL user: the user is defined in the configuration, so a master
// restarted empty has it again, and the default user gets the admin
// password (requirepass), so that only the lab logs in with every right.
func (s *security) serverArgs(port int) []string {
	var args []string
	if s.tls != nil {
		args = s.tls.serverArgs(port)
	} else {
		args = []string{"--port", fmt.Sprint(port)}
	}
	if s.user != "" {
		args = append(args, "--requirepass", s.adminPass, "--user", s.user, "on", ">"+s.pass)
		args = append(args, s.rules...)
	}
	return args
}

func (s *security) tlsConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.clientConfig()
}

// clientOptions are the go-redis options of the lab's clients for addr:
// TLS when on, and the ACL user (user) or the admin.
func (s *security) clientOptions(addr string, admin bool) *redis.Options {
	o := &redis.Options{Addr: addr, TLSConfig: s.tlsConfig()}
	switch {
	case s.user == "":
	case admin:
		o.Password = s.adminPass
	default:
		o.Username, o.Password = s.user, s.pass
	}
	return o
}

// TLSConfig returns a new client TLS configuration that trusts the lab's CA
// (and nothing else), or nil without Options.TLS. Set it as
// redis.Options.TLSConfig.
func (c *Masters) TLSConfig() *tls.Config { return c.sec.tlsConfig() }

// CACertFile returns the path of the lab's CA certificate (PEM), for
// clients configured by file (the bench's -tls-ca, redis-cli --cacert), or
// "" without Options.TLS. It is removed by Close.
func (c *Masters) CACertFile() string {
	if c.sec.tls == nil {
		return ""
	}
	return c.sec.tls.caFile
}

// ACLUser returns Options.ACLUser and its password (generated when
// Options.ACLPassword was empty), or two empty strings without it.
func (c *Masters) ACLUser() (user, password string) { return c.sec.user, c.sec.pass }

// URL returns a redis:// URL for master i (rediss:// with Options.TLS),
// carrying the ACL user and password when Options.ACLUser is set, as
// redis.ParseURL reads it; "" when i is out of range. The URL holds a
// password: do not log it. With TLS, the client must also trust
// CACertFile.
func (c *Masters) URL(i int) string {
	if i < 0 || i >= c.n {
		return ""
	}
	u := url.URL{Scheme: "redis", Host: c.addrs[i]}
	if c.sec.tls != nil {
		u.Scheme = "rediss"
	}
	if c.sec.user != "" {
		u.User = url.UserPassword(c.sec.user, c.sec.pass)
	}
	return u.String()
}

// Admin returns a client for master i that logs in with every right (the
// default user and the lab's admin password when Options.ACLUser is set;
// then it is not Client(i)'s user), for tests that inspect or prepare what
// the ACL user may not touch. It is the same one on every call and Close
// closes it; nil when i is out of range.
func (c *Masters) Admin(i int) *redis.Client {
	if i < 0 || i >= c.n {
		return nil
	}
	if c.admins == nil {
		return c.clients[i]
	}
	return c.admins[i]
}
