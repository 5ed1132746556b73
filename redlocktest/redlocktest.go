package redlocktest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/faultproxy"
	"github.com/quorumlab/redlock/internal/keys"
	"github.com/quorumlab/redlock/redlock"
)

// DefaultN is how many masters New and Start run when Options.N is zero:
// five, the usual Redlock deployment (a majority of three).
const DefaultN = 5

// MaxN is the most masters one Masters runs.
const MaxN = 64

// Options configures a Masters. A nil *Options means all defaults.
type Options struct {
	// N is how many masters to run, 1 to MaxN. Default: DefaultN (5).
	N int
}

// Masters is N independent in-process Redis masters (miniredis), each
// behind its own TCP front door on 127.0.0.1 that can stall or refuse.
// Its methods are safe for concurrent use.
type Masters struct {
	servers []*miniredis.Miniredis
	fronts  []*faultproxy.Proxy
	clients []*redis.Client
	addrs   []string

	mu      sync.Mutex
	closed  bool
	lockers []*redlock.Locker
}

// errClosed is returned by the methods of a Masters after Close.
var errClosed = errors.New("redlocktest: masters closed")

// New starts the masters for the test or benchmark tb and registers their
// Close with tb.Cleanup. It fails tb (Fatal) if they cannot start; call it
// from the test's goroutine.
func New(tb testing.TB, opts *Options) *Masters {
	tb.Helper()
	m, err := Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("redlocktest: closing the masters: %v", err)
		}
	})
	return m
}

// Start starts the masters without a testing.TB, for a TestMain or a
// program; the caller must Close them. It returns an error for bad options
// or if a server or its front door cannot listen.
func Start(opts *Options) (*Masters, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.N == 0:
		o.N = DefaultN
	case o.N < 0 || o.N > MaxN:
		return nil, fmt.Errorf("redlocktest: Options.N is %d; it must be between 1 and %d (0 means %d)", o.N, MaxN, DefaultN)
	}
	m := &Masters{}
	for i := range o.N {
		s := miniredis.NewMiniRedis()
		if err := s.Start(); err != nil {
			m.shutdown()
			return nil, fmt.Errorf("redlocktest: starting master %d: %w", i, err)
		}
		// Keys expire in real time, as on a real master, not only when
		// FastForward is called.
		s.ClockTTL(true)
		m.servers = append(m.servers, s)
		f, err := faultproxy.Start(s.Addr())
		if err != nil {
			m.shutdown()
			return nil, fmt.Errorf("redlocktest: starting master %d's listener: %w", i, err)
		}
		m.fronts = append(m.fronts, f)
		m.addrs = append(m.addrs, f.Addr())
		m.clients = append(m.clients, redis.NewClient(&redis.Options{Addr: f.Addr()}))
	}
	return m, nil
}

// N returns how many masters there are.
func (m *Masters) N() int { return len(m.servers) }

// Addrs returns each master's address (host:port on 127.0.0.1), by index:
// what to give a client of your own, e.g. redis.NewClient(&redis.Options{Addr: a}).
func (m *Masters) Addrs() []string { return append([]string(nil), m.addrs...) }

// Clients returns one go-redis client per master, by index, with go-redis's
// default options: what redlock.New takes. The clients are shared by every
// call and closed by Close; do not close them yourself.
func (m *Masters) Clients() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(m.clients))
	for i, c := range m.clients {
		out[i] = c
	}
	return out
}

// Servers returns the miniredis server behind each master, by index, for
// in-process access that Stall and Refuse do not affect: reading or
// deleting keys, FastForward on one master, SetError, and the rest of
// miniredis's API. Do not Close them: Close does.
func (m *Masters) Servers() []*miniredis.Miniredis {
	return append([]*miniredis.Miniredis(nil), m.servers...)
}

// Locker returns a Locker over every master, as redlock.New(m.Clients(),
// opts) does, and closes it in Close (before the masters, so nothing it
// started is left running). The error is redlock.New's.
func (m *Masters) Locker(opts *redlock.Options) (*redlock.Locker, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	l, err := redlock.New(m.Clients(), opts)
	if err != nil {
		return nil, err
	}
	m.lockers = append(m.lockers, l)
	return l, nil
}

// Stall makes the given masters stop answering: their connections stay
// open, but nothing sent to them is handed on and nothing comes back (a
// byte already on its way when Stall is called may still arrive). New
// connections are accepted and hang the same way. This is what a
// SIGSTOPped or frozen server looks like to a client: a Locker gives up on
// each call after its MasterTimeout and then skips the master until it
// answers again. The server itself keeps running, and its keys keep
// expiring.
func (m *Masters) Stall(i ...int) error {
	return m.each("Stall", i, (*faultproxy.Proxy).Stall)
}

// Resume undoes Stall: what was sent meanwhile is handed on and answered,
// in order, as a SIGCONTinued server would.
func (m *Masters) Resume(i ...int) error {
	return m.each("Resume", i, (*faultproxy.Proxy).Resume)
}

// Refuse makes the given masters look down: every open connection is
// reset and every new one is reset as soon as it is accepted, so clients
// fail at once (with "connection reset by peer" or EOF). The listening
// port stays bound (closing it would be closer to a dead host, but the
// port could be taken meanwhile). The server keeps its keys.
func (m *Masters) Refuse(i ...int) error {
	return m.each("Refuse", i, (*faultproxy.Proxy).Refuse)
}

// Heal undoes Refuse: new connections are served again (clients
// reconnect by themselves).
func (m *Masters) Heal(i ...int) error {
	return m.each("Heal", i, (*faultproxy.Proxy).Heal)
}

// each applies do to the fronts of the masters idx, after checking them
// all.
func (m *Masters) each(name string, idx []int, do func(*faultproxy.Proxy)) error {
	if len(idx) == 0 {
		return fmt.Errorf("redlocktest: %s: no master given (masters are numbered 0 to %d)", name, len(m.fronts)-1)
	}
	for _, i := range idx {
		if i < 0 || i >= len(m.fronts) {
			return fmt.Errorf("redlocktest: %s: there is no master %d (masters are numbered 0 to %d)", name, i, len(m.fronts)-1)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	for _, i := range idx {
		do(m.fronts[i])
	}
	return nil
}

// FastForward makes every master's keys lose d of their remaining TTL, at
// once (miniredis's FastForward on each; for one master, use Servers).
//
// It moves the masters' clocks only. A Locker's validity is measured on
// this process's real monotonic clock, so FastForward does not bring a
// lock's Deadline nearer: it models masters losing the key early (a clock
// that jumped, say), which is exactly what Redlock's assumptions rule out.
// A lock whose keys were fast-forwarded away still reports Valid() until
// its Deadline; Extend then fails with ErrLost, and another Locker can
// take the resource meanwhile.
func (m *Masters) FastForward(d time.Duration) {
	for _, s := range m.servers {
		s.FastForward(d)
	}
}

// Tokens returns, by master, the token stored in resource's lock key, or ""
// where the key is absent (or not a string). l gives the key naming
// (Options.KeyPrefix, Options.RedsyncKeys); a nil l means the default
// naming. Each value is read in-process, so Tokens works on stalled and
// refused masters too. Compare with Lock.Token() to see where a lock is
// held.
func (m *Masters) Tokens(l *redlock.Locker, resource string) []string {
	key := lockKey(l, resource)
	out := make([]string, len(m.servers))
	for i, s := range m.servers {
		if v, err := s.Get(key); err == nil {
			out[i] = v
		}
	}
	return out
}

// Holding returns how many masters hold lock, acquired through l (which
// gives the key naming, as in Tokens; nil means the default naming). The
// lock may be a mutex's, a semaphore's permit, a read-write lock's (read
// or write) or an election's leadership (Election.Campaign): each master
// counts when any of the keys such a lock of Resource() can hold has its
// token (readers: a live entry in the readers' set).
func (m *Masters) Holding(l *redlock.Locker, lock *redlock.Lock) int {
	if lock == nil {
		return 0
	}
	key, tok := lockKey(l, lock.Resource()), lock.Token()
	names := []string{key, key + ":w", key + electionInfix}
	for j := 1; j <= keys.MaxPermits; j++ {
		names = append(names, key+":s:"+strconv.Itoa(j))
	}
	n := 0
	for _, s := range m.servers {
		held := false
		for _, k := range names {
			if v, err := s.Get(k); err == nil && v == tok {
				held = true
				break
			}
		}
		if !held {
			// A reader's entry is scored with its expiry in the master's ms.
			score, err := s.ZScore(key+":r", tok)
			held = err == nil && score > float64(time.Now().UnixMilli()) // miniredis: TIME is the real clock
		}
		if held {
			n++
		}
	}
	return n
}

// Fences returns, by master, the fence counter of resource (what
// Options.Fencing keeps beside the lock key; 0 where there is none). l
// gives the key naming, as in Tokens.
func (m *Masters) Fences(l *redlock.Locker, resource string) []uint64 {
	key := lockKey(l, resource) + ":fence"
	out := make([]uint64, len(m.servers))
	for i, s := range m.servers {
		if v := s.HGet(key, "fence"); v != "" {
			out[i], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return out
}

// An election's keys (redlock.Locker.Election) hang off its name's lock
// key: "<lock key>:e" is the election's own lock key, which holds the
// leader's token; "<lock key>:e:leader" is its record, a hash of the term,
// token and value the leader published, which stays after the leader goes.
const (
	electionInfix  = ":e"
	electionRecord = ":e:leader"
)

// Leader is one master's record of who leads an election (Leaders).
type Leader struct {
	// Token is the token in the election's lock key there: the
	// leadership's Lock.Token(); "" where the key is absent.
	Token string
	// Term and Value are what the leader published there (its
	// Lock.Fence() and the value of Campaign or Proclaim), when the
	// record names Token; zero otherwise: no leader there, one that has
	// not published yet, or a record an earlier leader left.
	Term  uint64
	Value string
}

// Leaders returns, by master, who leads the election called name there,
// by the rule redlock's Election.Leader reads each master with: the
// election's lock key's token, and the record's term and value when the
// record names that token. A majority of masters with one Token and Term
// is what Leader reports. l gives the key naming, as in Tokens (elections
// need a Locker without RedsyncKeys); nil means the default naming. Each
// master is read in-process, so Leaders works on stalled and refused
// masters too; its lock key and its record are read one after the other,
// not at one instant.
func (m *Masters) Leaders(l *redlock.Locker, name string) []Leader {
	key := lockKey(l, name)
	out := make([]Leader, len(m.servers))
	for i, s := range m.servers {
		tok, err := s.Get(key + electionInfix)
		if err != nil {
			continue
		}
		out[i].Token = tok
		if s.HGet(key+electionRecord, "token") != tok {
			continue
		}
		term, err := strconv.ParseUint(s.HGet(key+electionRecord, "term"), 10, 64)
		if err != nil {
			continue
		}
		out[i].Term, out[i].Value = term, s.HGet(key+electionRecord, "value")
	}
	return out
}

// lockKey is resource's lock key under l's naming, as documented on
// redlock.Options.KeyPrefix and RedsyncKeys.
func lockKey(l *redlock.Locker, resource string) string {
	o := redlock.Options{KeyPrefix: redlock.DefaultKeyPrefix}
	if l != nil {
		o = l.Options()
	}
	if o.RedsyncKeys {
		return o.KeyPrefix + resource
	}
	return o.KeyPrefix + "{" + resource + "}"
}

// Close closes every Locker made by Locker, then the clients, the front
// doors and the servers, and waits for every goroutine they started.
// Stalled and refused masters are resumed first, so that the Lockers'
// last releases get through. Close is idempotent; New's Cleanup calls it.
func (m *Masters) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	lockers := m.lockers
	m.lockers = nil
	for _, f := range m.fronts {
		f.Heal()
		f.Resume()
	}
	m.mu.Unlock()
	var errs []error
	for _, l := range lockers {
		errs = append(errs, l.Close())
	}
	return errors.Join(append(errs, m.shutdown())...)
}

// shutdown closes the clients, fronts and servers started so far.
func (m *Masters) shutdown() error {
	var errs []error
	for _, c := range m.clients {
		errs = append(errs, c.Close())
	}
	for _, f := range m.fronts {
		f.Close()
	}
	for _, s := range m.servers {
		s.Close()
	}
	return errors.Join(errs...)
}
