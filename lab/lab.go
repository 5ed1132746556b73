package lab

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/faultproxy"
	"github.com/redis/go-redis/v9"
)

// Backend names what runs the masters.
type Backend string

const (
	// Process runs each master as a local redis-server process (unix only).
	Process Backend = "process"
	// Docker runs each master in a container of Options.Image on a
	// network of its own, through the Driver of module labdocker
	// (testcontainers-go).
	Docker Backend = "docker"
)

// Options configures a Masters. The zero value works.
type Options struct {
	// Backend runs the masters as local processes or Docker containers
	// (which needs NewDriver: labdocker.Options sets both).
	// Default: $REDLOCK_LAB_BACKEND if set, else Process.
	Backend Backend
	// RedisServer is the redis-server binary, a path or a name looked up in
	// PATH; only the Process backend uses it. Default: "redis-server".
	RedisServer string
	// Image is the Redis image the Docker backend runs. It must already be
	// present locally: the lab never pulls (see labdocker.Available).
	// Default: $REDLOCK_REDIS_IMAGE if set, else "redis:7.4-alpine".
	Image string
	// NewDriver runs the masters of a backend other than Process; set by
	// labdocker for the Docker backend. Default: nil.
	NewDriver NewDriver
	// AppendFsyncAlways turns on AOF with appendfsync always, what fencing
	// needs to survive a restart of the process. Note that Restart still
	// starts from EMPTY data. Default: false (save "", appendonly no).
	AppendFsyncAlways bool
	// Proxy puts an in-process TCP fault proxy in front of each master so
	// Cut, Heal and Latency work; Addrs then returns the proxy addresses.
	// The Docker backend cuts without it (network disconnect); with it,
	// Cut and Heal go through the proxy instead. Default: false.
	Proxy bool
	// Logger receives debug records of starts and faults. Default: nil,
	// which discards.
	Logger *slog.Logger

	// TLS makes every master accept TLS connections only (port 0,
	// tls-port; no client certificates asked). A test CA and a server
	// certificate for 127.0.0.1 and localhost are made at Start (ECDSA
	// P-256) in the lab's temp directory. Client, Clients, Admin and the
	// lab's own connections then dial with TLS; TLSConfig and CACertFile
	// hand the CA to other clients. Process backend only. Default: false.
	TLS bool
	// ACLUser, when set, defines this ACL user on every master with
	// ACLPassword and ACLRules (in the masters' configuration, so a
	// restarted master has it again), and Client and Clients log in as
	// it. The default user then requires a random admin password: only
	// the lab's fault operations (Slow, JumpClock) and Admin use it.
	// Process backend only. Default: "", no ACL (default user, no
	// password).
	ACLUser string
	// ACLPassword is ACLUser's password (no spaces). Default: random (see
	// URL to hand it on).
	ACLPassword string
	// ACLRules are ACLUser's rules, space-separated as after
	// "ACL SETUSER name on >password". Default: DefaultACLRules, what
	// package redlock needs with its default KeyPrefix.
	ACLRules string
}

// ErrNoRedisServer is returned by Start when the redis-server binary cannot
// be found.
var ErrNoRedisServer = errors.New("lab: redis-server not found: install it (apt-get install redis-server), set Options.RedisServer, or use the Docker backend")

// ErrNoDocker is returned by labdocker.Available, and by Start with the
// Docker backend, when no Docker engine answers, the image is not present
// locally (the lab never pulls one), or no driver is set.
var ErrNoDocker = errors.New("lab: Docker backend unavailable")

var (
	errClosed     = errors.New("lab: cluster closed")
	errNotProxy   = errors.New("lab: Latency needs Options.Proxy, and so do Cut and Heal except on the Docker backend")
	errNotRunning = errors.New("lab: master is not running")
	errAddrInUse  = errors.New("lab: port taken by another process")
)

const (
	portAttempts = 5 // fresh ports tried when another process wins the race
	probeEvery   = 10 * time.Millisecond
)

//go:embed jumpclock.lua
var jumpClockLua string

// backend is what runs the masters; the local-process one lives in
// process.go. Indices are already range-checked by Masters.
type backend interface {
	// start launches master i and returns its address once it answers.
	start(ctx context.Context, i int) (addr string, err error)
	pause(i int) error
	resume(i int) error
	// kill stops master i for good and waits for it; a no-op if it is down.
	kill(i int) error
	// restart starts master i again on the same address with empty data.
	// keep: start with what the master persisted (its AOF) instead.
	restart(ctx context.Context, i int, keep bool) error
	// close kills every master, joins every goroutine and removes files.
	close() error
}

// cutter is a backend that can partition a master without the proxy.
type cutter interface {
	cut(i int) error
	heal(i int) error
}

// freePort returns a 127.0.0.1 port that was free a moment ago; callers
// retry with another one when they lose a race for it.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("lab: finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port, nil
}

// Masters is N independent Redis masters started by Start. Its methods are
// safe for concurrent use. Close must be called (ForTest arranges it).
type Masters struct {
	n       int
	be      backend
	log     *slog.Logger
	servers []string            // where the masters listen
	addrs   []string            // what clients dial: servers, or proxies in front of them
	proxies []*faultproxy.Proxy // nil without Options.Proxy
	jump    *redis.Script
	sec     *security
	admins  []*redis.Client // Admin(i) with Options.ACLUser; else Client(i) serves

	mu      sync.Mutex
	clients []*redis.Client // Client(i), created once
	extra   []*redis.Client // from Clients, closed by Close
	closed  bool

	closeOnce sync.Once
	closeErr  error
}

// Start starts n masters on free 127.0.0.1 ports in parallel, as local
// processes each with its own temp directory or as containers on a network
// of their own (Options.Backend), and returns once each answers. On error
// nothing is left running. opts may be nil.
func Start(ctx context.Context, n int, opts *Options) (*Masters, error) {
	if n < 1 {
		return nil, fmt.Errorf("lab: need at least one master, got %d", n)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backend == "" {
		o.Backend = Backend(os.Getenv("REDLOCK_LAB_BACKEND"))
	}
	sec, err := newSecurity(&o)
	if err != nil {
		return nil, err
	}
	var be backend
	switch o.Backend {
	case "", Process:
		if o.RedisServer == "" {
			o.RedisServer = "redis-server"
		}
		bin, err := exec.LookPath(o.RedisServer)
		if err != nil {
			return nil, fmt.Errorf("%w (%w)", ErrNoRedisServer, err)
		}
		pb, err := newProcessBackend(bin, o.AppendFsyncAlways, n, o.Logger)
		if err != nil {
			return nil, err
		}
		if o.TLS {
			if sec.tls, err = makeTLSFiles(pb.root); err != nil {
				return nil, errors.Join(err, pb.close())
			}
		}
		pb.sec = sec
		be = pb
	case Docker:
		if o.TLS || o.ACLUser != "" {
			return nil, ErrNeedsProcessBackend
		}
		if o.NewDriver == nil {
			return nil, fmt.Errorf("%w: %w", ErrNoDocker, errNoDriver)
		}
		d, err := o.NewDriver(ctx, n, o)
		if err != nil {
			return nil, err
		}
		be = driverBackend{d}
	default:
		return nil, fmt.Errorf("lab: unknown backend %q (want %q or %q)", o.Backend, Process, Docker)
	}
	c := &Masters{
		n:    n,
		be:   be,
		sec:  sec,
		log:  o.Logger,
		jump: redis.NewScript(jumpClockLua),
	}
	// The first failed start cancels the others; nothing is left running.
	servers, err := startAll(ctx, n, be.start)
	if err != nil {
		return nil, errors.Join(err, be.close())
	}
	c.servers = servers
	c.addrs = c.servers
	if o.Proxy {
		c.addrs = make([]string, n)
		for i, s := range c.servers {
			p, err := faultproxy.Start(s)
			if err != nil {
				for _, q := range c.proxies {
					q.Close()
				}
				return nil, errors.Join(fmt.Errorf("lab: proxy for master %d: %w", i, err), be.close())
			}
			c.proxies = append(c.proxies, p)
			c.addrs[i] = p.Addr()
		}
	}
	for _, a := range c.addrs {
		c.clients = append(c.clients, redis.NewClient(sec.clientOptions(a, false)))
		if sec.user != "" {
			c.admins = append(c.admins, redis.NewClient(sec.clientOptions(a, true)))
		}
	}
	c.log.Info("lab: masters up", "n", n, "backend", cmp.Or(o.Backend, Process), "addrs", c.addrs, "proxy", o.Proxy,
		"tls", o.TLS, "acl_user", o.ACLUser)
	return c, nil
}

// ForTest starts n masters like Start and closes them in tb.Cleanup. It
// fails the test with the reason when they cannot start, including when
// redis-server is missing (ErrNoRedisServer) or Docker is (ErrNoDocker);
// labdocker.ForTest skips instead where there is no Docker.
func ForTest(tb testing.TB, n int, opts *Options) *Masters {
	tb.Helper()
	c, err := Start(tb.Context(), n, opts)
	if err != nil {
		tb.Fatalf("lab: starting %d redis masters: %v", n, err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("lab: close: %v", err)
		}
	})
	return c
}

// N returns the number of masters.
func (c *Masters) N() int { return c.n }

// Addrs returns "127.0.0.1:port" for masters 0..N-1: the proxy addresses
// when Options.Proxy is set. The slice is a copy.
func (c *Masters) Addrs() []string { return append([]string(nil), c.addrs...) }

// Client returns a go-redis client with default options (only Addr set, and
// with Options.TLS the TLS configuration, with Options.ACLUser its user and
// password) for master i, the same one on every call; Close closes it. It
// returns nil when i is out of range.
func (c *Masters) Client(i int) *redis.Client {
	if i < 0 || i >= c.n {
		return nil
	}
	return c.clients[i]
}

// Clients returns new default-option clients (set up as Client's) for
// masters 0..N-1 on every call, each with its own pool, so a test can build
// several independent lockers. Close closes them all.
func (c *Masters) Clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, c.n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.addrs {
		cl := redis.NewClient(c.sec.clientOptions(a, false))
		if c.closed {
			_ = cl.Close()
		} else {
			c.extra = append(c.extra, cl)
		}
		out[i] = cl
	}
	return out
}

func (c *Masters) check(i int) error {
	if i < 0 || i >= c.n {
		return fmt.Errorf("lab: master index %d out of range [0, %d)", i, c.n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosed
	}
	return nil
}

// Pause freezes master i with SIGSTOP (docker pause) and returns once it is
// stopped: its socket stays open and it answers nothing until Resume.
// Pausing a paused master is a no-op; pausing a killed one is an error.
func (c *Masters) Pause(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: pause", "master", i)
	return c.be.pause(i)
}

// Resume continues master i with SIGCONT (docker unpause); it answers what
// was queued.
func (c *Masters) Resume(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: resume", "master", i)
	return c.be.resume(i)
}

// ResumeAll resumes every master, paused or not, ignoring errors; for
// cleanups that must not leave a master stopped.
func (c *Masters) ResumeAll() {
	for i := range c.n {
		_ = c.Resume(i)
	}
}

// Kill SIGKILLs master i (removes its container) and waits until it has
// exited; its data is lost. Killing a master that is down is a no-op.
func (c *Masters) Kill(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: kill", "master", i)
	return c.be.kill(i)
}

// Restart starts master i again on the same port with EMPTY data (killing it
// first if it runs; a new container on the Docker backend) and returns once
// it answers. Clients reconnect on their own.
func (c *Masters) Restart(ctx context.Context, i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: restart", "master", i)
	return c.be.restart(ctx, i, false)
}

// RestartPersisted SIGKILLs master i and starts it again on the same port
// with whatever it had persisted: with Options.AppendFsyncAlways, every
// write it acknowledged (what fencing counters need to survive a crash);
// without it, nothing. Only the Process backend supports it.
func (c *Masters) RestartPersisted(ctx context.Context, i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: restart keeping data", "master", i)
	return c.be.restart(ctx, i, true)
}

// private returns a one-connection admin client straight to master i
// (bypassing any proxy) that honours ctx deadlines; the caller closes it.
func (c *Masters) private(i int) *redis.Client {
	o := c.sec.clientOptions(c.servers[i], true)
	o.ContextTimeoutEnabled = true
	o.PoolSize = 1
	o.MaxRetries = -1
	return redis.NewClient(o)
}

// Slow makes master i answer nothing for d by issuing CLIENT PAUSE <ms> ALL
// on a private connection; it returns once the pause is in effect. Unlike
// Pause the process keeps running, and the pause ends by itself.
func (c *Masters) Slow(ctx context.Context, i int, d time.Duration) error {
	if err := c.check(i); err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("lab: slow master %d: duration %v must be positive", i, d)
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	cl := c.private(i)
	defer cl.Close()
	if err := cl.Do(ctx, "CLIENT", "PAUSE", int64(ms), "ALL").Err(); err != nil {
		return fmt.Errorf("lab: slow master %d: %w", i, err)
	}
	c.log.Debug("lab: slow", "master", i, "for", d)
	return nil
}

// JumpClock SIMULATES a forward jump of d in master i's clock: every key's
// remaining TTL shrinks by d, keys whose TTL is at most d are deleted (as
// expiry would), keys without a TTL are untouched. It returns how many keys
// were shortened or deleted. It is a simulation of the jump's effect on
// expiry only (the master's real clock is unchanged) because libfaketime
// preloaded into Debian's redis-server crashes it at start-up.
func (c *Masters) JumpClock(ctx context.Context, i int, d time.Duration) (int, error) {
	if err := c.check(i); err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("lab: jump clock on master %d: only forward jumps, got %v", i, d)
	}
	cl := c.private(i)
	defer cl.Close()
	n, err := c.jump.Run(ctx, cl, nil, d.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("lab: jump clock on master %d: %w", i, err)
	}
	c.log.Debug("lab: clock jump (simulated)", "master", i, "by", d, "keys", n)
	return n, nil
}

func (c *Masters) proxy(i int) (*faultproxy.Proxy, error) {
	if err := c.check(i); err != nil {
		return nil, err
	}
	if c.proxies == nil {
		return nil, errNotProxy
	}
	return c.proxies[i], nil
}

// Cut partitions master i from its clients until Heal. Through the proxy
// (Options.Proxy) open connections are dropped and new ones are accepted but
// blackholed, so clients see timeouts. On the Docker backend without the
// proxy the container is disconnected from its network, which also removes
// its published port: new connections are refused and open ones get EOF,
// a fast failure rather than a silent one. Cutting a cut master is a no-op;
// a master killed or restarted while cut stays cut.
func (c *Masters) Cut(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: cut", "master", i)
	if c.proxies != nil {
		c.proxies[i].Cut()
		return nil
	}
	if cb, ok := c.be.(cutter); ok {
		return cb.cut(i)
	}
	return errNotProxy
}

// Heal ends a Cut of master i: the proxy forwards new connections again and
// closes those held during the cut, or the Docker backend reconnects the
// container to its network on the same port (connections broken by the cut
// stay broken; clients reconnect). Healing a master that is not cut is a
// no-op.
func (c *Masters) Heal(i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	c.log.Debug("lab: heal", "master", i)
	if c.proxies != nil {
		c.proxies[i].Heal()
		return nil
	}
	if cb, ok := c.be.(cutter); ok {
		return cb.heal(i)
	}
	return errNotProxy
}

// Latency delays every chunk of data to and from master i by d each way, so
// a round trip gains about 2d (needs Options.Proxy); 0 removes it. It applies
// to data already in flight and to open connections.
func (c *Masters) Latency(i int, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("lab: latency %v must not be negative", d)
	}
	p, err := c.proxy(i)
	if err != nil {
		return err
	}
	c.log.Debug("lab: latency", "master", i, "each way", d)
	p.SetLatency(d)
	return nil
}

// DelayOpen delays data on the connections to master i open now, on top
// of Latency, until they close: by toMaster on its way to the master, by
// fromMaster on its way back. Connections opened later are not delayed
// (needs Options.Proxy). Data a client wrote before closing such a
// connection still reaches the master, late: a network that holds a
// connection's packets while the client moves to a new one. It returns
// how many connections it delayed.
func (c *Masters) DelayOpen(i int, toMaster, fromMaster time.Duration) (int, error) {
	if toMaster < 0 || fromMaster < 0 {
		return 0, fmt.Errorf("lab: delays %v, %v must not be negative", toMaster, fromMaster)
	}
	p, err := c.proxy(i)
	if err != nil {
		return 0, err
	}
	c.log.Debug("lab: delay open connections", "master", i, "to master", toMaster, "from master", fromMaster)
	return p.DelayOpen(toMaster, fromMaster), nil
}

// Close kills every master (paused ones too), closes every client handed
// out, stops the proxies and removes the temp directories, or the containers
// and the network. It leaves no process, container or goroutine behind and
// is idempotent: later calls return the first call's result.
func (c *Masters) Close() error {
	// Once.Do makes a concurrent second Close wait for the first to finish.
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Masters) close() error {
	c.mu.Lock()
	c.closed = true
	clients := append(append(append([]*redis.Client(nil), c.clients...), c.admins...), c.extra...)
	c.extra = nil
	c.mu.Unlock()

	var errs []error
	for _, cl := range clients {
		if err := cl.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, p := range c.proxies {
		p.Close()
	}
	errs = append(errs, c.be.close())
	err := errors.Join(errs...)
	c.log.Info("lab: closed", "err", err)
	return err
}

// launchOnFreePort calls launch with free loopback ports until one start is
// not lost to another process taking the port first.
func launchOnFreePort(log *slog.Logger, i int, launch func(port int) error) error {
	var err error
	for range portAttempts {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		if err = launch(port); err == nil || !errors.Is(err, errAddrInUse) {
			return err
		}
		log.Debug("lab: port race, retrying", "master", i, "port", port)
	}
	return err
}

// relaunchOnPort starts a master again on the port it had: clients keep
// their address, so a lost port race is retried on the same port for a
// short while instead of moving.
func relaunchOnPort(ctx context.Context, port int, launch func(port int) error) error {
	var err error
	for range portAttempts {
		if err = launch(port); !errors.Is(err, errAddrInUse) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}
