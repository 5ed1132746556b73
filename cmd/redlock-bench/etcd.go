//go:build etcd

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcdBuilt: -impls etcd works in this build (extras.go).
const etcdBuilt = true

// etcdImpls is etcd's concurrency.Mutex, beside ours in the cells, on the
// etcd cluster the run starts (startEtcd): only when -impls names it.
var etcdImpls = []implSpec{{
	optIn: true,
	name:  etcdImplName, source: sourceNone,
	desc: "etcd's concurrency.Mutex (client v3.5) on a 3-member etcd cluster on loopback that the bench starts from\n" +
		"                    Debian's etcd-server: each worker its own client and session, lease TTL -ttl rounded up to\n" +
		"                    whole seconds; TryLock+Unlock when uncontended, Lock+Unlock when contended; no validity",
	open: func([]*redis.Options, time.Duration, *benchTelemetry) (impl, error) {
		return nil, errors.New("etcd: opened through openIn") // not reached: runCell prefers openIn
	},
	openIn: openEtcdMutex,
}}

// etcdElections is etcd's concurrency.Election for the election scenarios.
var etcdElections = []electionSpec{{
	name: etcdImplName,
	desc: "etcd's concurrency.Election: each campaigner its own client and session (lease TTL -election-ttl)",
	open: openEtcdCampaigner,
}}

// etcdKeyPrefix is every key the bench writes to etcd; a lease's keys
// go with its lease when its lease is revoked (or its holder killed).
const etcdKeyPrefix = "/rlbench/"

// ---- the cluster ----

// etcdMembers is the cluster's size: the smallest that tolerates a
// member's loss, as five Redis masters tolerate two.
const etcdMembers = 3

// etcdStartBound bounds the wait for the members to elect a leader.
const etcdStartBound = 30 * time.Second

// etcdStopBound is how long a member gets to exit after SIGTERM before
// SIGKILL.
const etcdStopBound = 10 * time.Second

// errNoEtcd is -impls etcd without the server on PATH.
var errNoEtcd = errors.New("-impls etcd: no etcd on PATH; the bench starts a 3-member etcd cluster from Debian's etcd-server " +
	"package (apt-get install etcd-server)")

// etcdFlags documents the members' command line (startEtcdOnce): each
// member on its own loopback client and peer ports, a data directory in a
// fresh temp directory, a new cluster with a token of this run, zap logs
// at warn level to the member's log file; everything else etcd's
// defaults: heartbeat 100 ms, election timeout 1 s, WAL fsync on (no
// --unsafe-no-fsync), no auto-compaction.
const etcdFlags = "--name mI --data-dir DIR/mI --listen-client-urls/--advertise-client-urls http://127.0.0.1:C " +
	"--listen-peer-urls/--initial-advertise-peer-urls http://127.0.0.1:P --initial-cluster m0=…,m1=…,m2=… " +
	"--initial-cluster-state new --initial-cluster-token redlock-bench-RUN --logger zap --log-outputs stderr --log-level warn"

// startEtcd starts etcdMembers etcd processes on loopback and returns once
// they have elected a leader; close stops them and removes their data.
// It fails when etcd is not on PATH, naming the package.
func startEtcd(ctx context.Context, stderr io.Writer) (*etcdServers, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, errNoEtcd
	}
	version := etcdVersion(ctx, bin)
	var errs []error
	// A port taken between freePort and etcd's bind fails the start: try
	// again with new ports.
	for range 3 {
		es, err := startEtcdOnce(ctx, bin, version)
		if err == nil {
			fmt.Fprintf(stderr, "redlock-bench: etcd %s: %d members on %s\n", version, etcdMembers, strings.Join(es.endpoints, ","))
			return es, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("starting %d etcd members: %w", etcdMembers, errors.Join(errs...))
}

// etcdVersion is the server's version from etcd --version ("3.4.23"), or
// "unknown".
func etcdVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--version").Output()
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "etcd Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// etcdMember is one etcd process.
type etcdMember struct {
	name string
	cmd  *exec.Cmd
	log  string        // its log file
	done chan struct{} // closed once it has exited
	err  error         // its exit, once done
}

func startEtcdOnce(ctx context.Context, bin, version string) (_ *etcdServers, err error) {
	dir, err := os.MkdirTemp("", "redlock-bench-etcd-")
	if err != nil {
		return nil, err
	}
	clientPorts, peerPorts := make([]int, etcdMembers), make([]int, etcdMembers)
	var peers []string
	for i := range etcdMembers {
		if clientPorts[i], err = freeLoopbackPort(); err == nil {
			peerPorts[i], err = freeLoopbackPort()
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, peerPorts[i]))
	}
	token := "redlock-bench-" + rand.Text()[:10]
	members := make([]*etcdMember, 0, etcdMembers)
	var endpoints []string
	stop := func() error {
		var errs []error
		for _, m := range members {
			errs = append(errs, m.stop())
		}
		errs = append(errs, os.RemoveAll(dir))
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	for i := range etcdMembers {
		name := fmt.Sprintf("m%d", i)
		client := fmt.Sprintf("http://127.0.0.1:%d", clientPorts[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", peerPorts[i])
		args := []string{"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"}
		m, err := startEtcdMember(bin, name, filepath.Join(dir, name+".log"), args)
		if err != nil {
			return nil, err
		}
		members = append(members, m)
		endpoints = append(endpoints, client)
	}
	if err := waitEtcdLeader(ctx, endpoints, members); err != nil {
		return nil, err
	}
	pids := make([]int, len(members))
	for i, m := range members {
		pids[i] = m.cmd.Process.Pid
	}
	return &etcdServers{
		version:   version,
		endpoints: endpoints,
		note: fmt.Sprintf("%d etcd %s members on loopback started by the bench, data in %s (%s); otherwise etcd's defaults: heartbeat 100 ms, election timeout 1 s, WAL fsync on",
			etcdMembers, version, os.TempDir(), etcdFlags),
		cpu:   func() (time.Duration, error) { return procsCPU(pids) },
		close: sync.OnceValue(stop),
	}, nil
}

func startEtcdMember(bin, name, logPath string, args []string) (*etcdMember, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("etcd %s: %w", name, err)
	}
	m := &etcdMember{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		f.Close()
		close(m.done)
	}()
	return m, nil
}

// stop ends the member: SIGTERM, then SIGKILL after etcdStopBound.
func (m *etcdMember) stop() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		return nil
	case <-time.After(etcdStopBound):
	}
	_ = m.cmd.Process.Kill()
	<-m.done
	return fmt.Errorf("etcd %s: still running %v after SIGTERM; killed", m.name, etcdStopBound)
}

// logTail is the end of the member's log, for errors.
func (m *etcdMember) logTail() string {
	b, _ := os.ReadFile(m.log)
	b = bytes.TrimSpace(b)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

// waitEtcdLeader returns once every member answers Status naming the same
// leader; a member that exits first fails it with its log's tail.
func waitEtcdLeader(ctx context.Context, endpoints []string, members []*etcdMember) error {
	ctx, cancel := context.WithTimeout(ctx, etcdStartBound)
	defer cancel()
	cli, err := newEtcdClient(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	var last error
	for {
		for _, m := range members {
			select {
			case <-m.done:
				return fmt.Errorf("etcd %s exited during start-up (%v): %s", m.name, m.err, m.logTail())
			default:
			}
		}
		leaders := map[uint64]bool{}
		last = nil
		for _, ep := range endpoints {
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, ep)
			scancel()
			switch {
			case err != nil:
				last = fmt.Errorf("%s: %w", ep, err)
			case st.Leader == 0:
				last = fmt.Errorf("%s: no leader yet", ep)
			default:
				leaders[st.Leader] = true
			}
		}
		if last == nil && len(leaders) == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("members name %d leaders", len(leaders))
			}
			return fmt.Errorf("etcd: no agreed leader within %v: %w", etcdStartBound, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeLoopbackPort is a 127.0.0.1 port that was free a moment ago.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// procsCPU sums the user+system CPU time of pids (/proc/PID/stat, fields
// 14 and 15, in clock ticks of 1/100 s, the USER_HZ of every Linux ABI the
// bench runs on).
func procsCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, err
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] is field 3 (state): utime and stime are fields 14 and 15.
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
		}
		for _, s := range f[11:13] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			sum += time.Duration(n) * 10 * time.Millisecond
		}
	}
	return sum, nil
}

// newEtcdClient is a client of the cluster with the defaults a user gets
// (it balances over every endpoint), without its logging.
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdSession is a client and a lease kept alive on it (concurrency.NewSession): what one process using
// etcd's concurrency package has.
type etcdSession struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func openEtcdSession(endpoints []string, ttl time.Duration) (*etcdSession, error) {
	cli, err := newEtcdClient(endpoints)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSeconds(ttl)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("etcd session: %w", err), cli.Close())
	}
	return &etcdSession{cli: cli, s: s}, nil
}

// close revokes the lease (its keys go with it) and closes the
// client.
func (e *etcdSession) close() error {
	return errors.Join(e.s.Close(), e.cli.Close())
}

// grantedTTL is the lease's TTL as the server granted it (it
// raises one below its minimum, 1.5 × the election timeout, rounded up).
func (e *etcdSession) grantedTTL(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := e.cli.TimeToLive(ctx, e.s.Lease())
	if err != nil {
		return 0, err
	}
	return time.Duration(r.GrantedTTL) * time.Second, nil
}

// ---- the mutex ----

// etcdMutex is one Locker's worth of etcd mutex users: one client and
// lease per worker, handed to whichever worker locks next (a worker
// holds at most one lock, so each holder has a lease of its own, as
// in the first look at etcd: each worker its own client and lease).
type etcdMutex struct {
	ttl  time.Duration // -ttl
	try  bool          // TryLock (uncontended cells); else Lock
	pool chan *etcdSession
	all  []*etcdSession
}

func openEtcdMutex(c cell, env cellEnv) (impl, error) {
	if env.etcd == nil {
		return nil, errors.New("etcd: no cluster started") // run starts one whenever -impls names etcd
	}
	m := &etcdMutex{ttl: env.ttl, try: !c.sc.shared, pool: make(chan *etcdSession, c.workers)}
	for range c.workers {
		s, err := openEtcdSession(env.etcd.endpoints, env.ttl)
		if err != nil {
			return nil, errors.Join(err, m.close())
		}
		m.all = append(m.all, s)
		m.pool <- s
	}
	return m, nil
}

func (m *etcdMutex) lock(ctx context.Context, resource string) (held, error) {
	var s *etcdSession
	select {
	case s = <-m.pool:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	mu := concurrency.NewMutex(s.s, etcdKeyPrefix+resource)
	var err error
	if m.try {
		err = mu.TryLock(ctx)
	} else {
		err = mu.Lock(ctx)
	}
	if err != nil {
		m.pool <- s
		switch {
		case errors.Is(err, concurrency.ErrLocked):
			err = fmt.Errorf("%w (%w)", errEtcdLocked, err)
		case errors.Is(err, concurrency.ErrSessionExpired):
			err = fmt.Errorf("%w (%w)", errEtcdSessionLost, err)
		}
		return nil, etcdTimedOut(err)
	}
	return &etcdHeld{m: m, s: s, mu: mu}, nil
}

// notes says how the cell used etcd: the lease TTL (as asked and as
// granted) and TryLock or Lock.
func (m *etcdMutex) notes() []string {
	op := "Lock+Unlock"
	if m.try {
		op = "TryLock+Unlock"
	}
	lease := fmt.Sprintf("session lease TTL %d s (-ttl %v rounded up to whole seconds, as etcd leases are)", ttlSeconds(m.ttl), m.ttl)
	if len(m.all) > 0 {
		if g, err := m.all[0].grantedTTL(context.Background()); err == nil && g != time.Duration(ttlSeconds(m.ttl))*time.Second {
			lease += fmt.Sprintf(", granted %v (the server's minimum)", g)
		}
	}
	return []string{fmt.Sprintf("etcd: %s, %d session(s), each with its own client; %s", op, len(m.all), lease)}
}

func (m *etcdMutex) close() error {
	var errs []error
	for _, s := range m.all {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

type etcdHeld struct {
	m  *etcdMutex
	s  *etcdSession
	mu *concurrency.Mutex
}

func (h *etcdHeld) unlock(ctx context.Context) error {
	err := h.mu.Unlock(ctx)
	h.m.pool <- h.s
	return etcdTimedOut(err)
}

// etcdTimedOut marks the server's own request timeout (a member that did
// not commit in time: a slow disk or a loaded machine) as errEtcdTimeout,
// which failureKind counts as a timeout, not an error.
func etcdTimedOut(err error) error {
	if errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrGRPCTimeout) {
		return fmt.Errorf("%w (%w)", errEtcdTimeout, err)
	}
	return err
}

// validity: etcd says nothing of it (sourceNone drops the samples).
func (h *etcdHeld) validity() validitySample { return validitySample{} }

// ---- the election ----

type etcdCampaigner struct {
	*etcdSession
	e *concurrency.Election
}

func openEtcdCampaigner(env electionEnv, name string) (campaigner, error) {
	if len(env.etcd) == 0 {
		return nil, errors.New("etcd: no cluster started")
	}
	s, err := openEtcdSession(env.etcd, env.ttl)
	if err != nil {
		return nil, err
	}
	return &etcdCampaigner{etcdSession: s, e: concurrency.NewElection(s.s, etcdKeyPrefix+name)}, nil
}

func (c *etcdCampaigner) campaign(ctx context.Context, value string) error {
	return c.e.Campaign(ctx, value)
}
func (c *etcdCampaigner) resign(ctx context.Context) error { return c.e.Resign(ctx) }
