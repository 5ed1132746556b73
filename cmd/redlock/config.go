package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// Exit codes, documented in usage and docs/runbook.md.
const (
	exitOK      = 0 // done; for inspect and list, the view was decided
	exitRefused = 1 // the operation was refused or failed (see the message)
	exitUsage   = 2 // bad flags, arguments, addresses or config file
	exitQuorum  = 3 // too few masters answered to decide
)

// usageError is a mistake in how the command was called: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// config is every flag common to the commands.
type config struct {
	masters     string
	configFile  string
	prefix      string
	redsyncKeys bool
	timeout     time.Duration
	tlsCA       string
	tlsInsecure bool
	json        bool
	quiet       bool
	version     bool

	set map[string]bool // flags given explicitly on the command line
}

// register defines the common flags on fs, with c's current values as
// defaults (so that a second flag set, after the command name, keeps what
// the first one parsed).
func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.masters, "masters", c.masters, "comma-separated masters: redis://[user:pass@]host:port[/db], rediss://..., or host:port (default: the config file's, else $REDLOCK_MASTERS)")
	fs.StringVar(&c.configFile, "config", c.configFile, `JSON config file: {"masters": [...], "prefix": "...", "redsync_keys": false, "tls_ca": "FILE", "tls_insecure": false}`)
	fs.StringVar(&c.prefix, "prefix", c.prefix, `the Lockers' KeyPrefix (default "redlock:", or "" with -redsync-keys)`)
	fs.BoolVar(&c.redsyncKeys, "redsync-keys", c.redsyncKeys, "the Lockers use Options.RedsyncKeys (keys are <prefix><resource>, no braces)")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "how long to wait for each master, per request")
	fs.StringVar(&c.tlsCA, "tls-ca", c.tlsCA, "PEM file of CA certificates to verify rediss:// masters with (default: the system's)")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", c.tlsInsecure, "do not verify rediss:// masters' certificates (testing only)")
	fs.BoolVar(&c.json, "json", c.json, "machine-readable output on stdout")
	fs.BoolVar(&c.quiet, "q", c.quiet, "no progress lines on stderr (there are none anyway when stderr is not a terminal)")
	fs.BoolVar(&c.version, "version", c.version, "print the version (module version and VCS revision) and exit")
}

// fileConfig is the -config file.
type fileConfig struct {
	Masters     []string `json:"masters"`
	Prefix      *string  `json:"prefix"`
	RedsyncKeys bool     `json:"redsync_keys"`
	TLSCA       string   `json:"tls_ca"`
	TLSInsecure bool     `json:"tls_insecure"`
}

// master is one Redis master to ask.
type master struct {
	name string // host:port[/db], never the password
	opts *redis.Options
}

// resolved is what the commands work with.
type resolved struct {
	masters []master
	keyOpts *redlock.Options // KeyPrefix and RedsyncKeys only
	audit   string           // the audit stream's key
	timeout time.Duration
}

// resolve reads the config file and the environment under the flags.
func (c *config) resolve() (*resolved, error) {
	var list []string
	from := "-masters"
	if c.configFile != "" {
		b, err := os.ReadFile(c.configFile)
		if err != nil {
			return nil, usagef("reading -config: %v", err)
		}
		var fc fileConfig
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return nil, usagef("-config %s: %v", c.configFile, err)
		}
		list = fc.Masters
		from = "-config " + c.configFile
		if fc.Prefix != nil && !c.set["prefix"] {
			c.prefix = *fc.Prefix
			c.set["prefix"] = true
		}
		if !c.set["redsync-keys"] {
			c.redsyncKeys = fc.RedsyncKeys
		}
		if !c.set["tls-ca"] {
			c.tlsCA = fc.TLSCA
		}
		if !c.set["tls-insecure"] {
			c.tlsInsecure = fc.TLSInsecure
		}
	}
	if c.masters != "" {
		list, from = strings.Split(c.masters, ","), "-masters"
	}
	if len(list) == 0 {
		if env := os.Getenv("REDLOCK_MASTERS"); env != "" {
			list, from = strings.Split(env, ","), "$REDLOCK_MASTERS"
		}
	}
	if len(list) == 0 {
		return nil, usagef("no masters: give -masters (e.g. -masters 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005 for the compose lab), -config FILE or $REDLOCK_MASTERS")
	}
	if c.timeout <= 0 {
		return nil, usagef("-timeout %v must be positive", c.timeout)
	}
	tlsCfg, err := c.tlsSettings()
	if err != nil {
		return nil, err
	}
	r := &resolved{timeout: c.timeout}
	seen := map[string]bool{}
	anyTLS := false
	for _, s := range list {
		m, err := parseMaster(strings.TrimSpace(s), c.timeout)
		if err != nil {
			return nil, usagef("%s: %v", from, err)
		}
		if seen[m.name] {
			return nil, usagef("%s: master %s is listed twice: a quorum needs independent masters", from, m.name)
		}
		seen[m.name] = true
		if m.opts.TLSConfig != nil {
			anyTLS = true
			tlsCfg(m.opts.TLSConfig)
		}
		r.masters = append(r.masters, m)
	}
	if !anyTLS && (c.tlsCA != "" || c.tlsInsecure) {
		return nil, usagef("-tls-ca and -tls-insecure apply to rediss:// masters, and none is given")
	}
	prefix := c.prefix
	if !c.set["prefix"] && !c.redsyncKeys {
		prefix = redlock.DefaultKeyPrefix
	}
	r.keyOpts = &redlock.Options{KeyPrefix: prefix, RedsyncKeys: c.redsyncKeys}
	// The key naming rules are the library's: check the prefix with them.
	if _, _, err := keyFor(r.keyOpts, "x"); err != nil {
		return nil, usagef("-prefix %q: %v", prefix, err)
	}
	r.audit = prefix + "audit"
	if prefix == "" {
		r.audit = redlock.DefaultKeyPrefix + "audit"
	}
	return r, nil
}

// tlsSettings returns what -tls-ca and -tls-insecure do to a rediss://
// master's tls.Config.
func (c *config) tlsSettings() (func(*tls.Config), error) {
	var pool *x509.CertPool
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, usagef("-tls-ca: %v", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("-tls-ca %s: no PEM certificate in it", c.tlsCA)
		}
	}
	insecure := c.tlsInsecure
	return func(tc *tls.Config) {
		if pool != nil {
			tc.RootCAs = pool
		}
		if insecure {
			tc.InsecureSkipVerify = true
		}
	}, nil
}

// parseMaster reads one address: a redis:// or rediss:// URL (go-redis's
// ParseURL), or host:port.
func parseMaster(s string, timeout time.Duration) (master, error) {
	var o *redis.Options
	if strings.Contains(s, "://") {
		var err error
		if o, err = redis.ParseURL(s); err != nil {
			// ParseURL's errors quote the URL's parts, never the password.
			return master{}, fmt.Errorf("bad master URL %s: %v", redactURL(s), err)
		}
	} else {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return master{}, fmt.Errorf("bad master address %q: want host:port or a redis:// URL", s)
		}
		o = &redis.Options{Addr: s}
	}
	// Fail fast and never retry: an operator wants to see at once which
	// master does not answer.
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.PoolSize = 2
	name := o.Addr
	if o.DB != 0 {
		name += "/" + strconv.Itoa(o.DB)
	}
	return master{name: name, opts: o}, nil
}

// redactURL drops the user information from a URL for messages.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "…@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// parseArgs parses args with fs, allowing flags after positional
// arguments ("release RES -force"); "--" ends the flags.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

var errHelp = errors.New("help requested")
