//go:build unix

package lab

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on how long one master may take, so no call hangs on a broken binary.
const (
	startTimeout = 10 * time.Second // from exec to answering INFO
	exitTimeout  = 10 * time.Second // from SIGKILL to reaped
	logTail      = 2048             // bytes of the server log quoted in a start error
)

// processBackend runs each master as a local redis-server process.
type processBackend struct {
	bin   string
	aof   bool
	root  string // temp dir holding node-<i>/{data,redis.log}
	log   *slog.Logger
	nodes []*procNode
	wg    sync.WaitGroup // one reaper per process started

	// extra, when set, gives more redis-server arguments at each launch
	// (cluster mode: cluster.go).
	extra func() ([]string, error)
	sec   *security // TLS and ACL set-up; never nil once started
}

var _ backend = (*processBackend)(nil)

type procNode struct {
	i   int
	dir string

	mu     sync.Mutex
	port   int
	cmd    *exec.Cmd
	done   chan struct{} // closed once cmd has been reaped
	paused bool
	closed bool
}

func newProcessBackend(bin string, aof bool, n int, log *slog.Logger) (*processBackend, error) {
	root, err := os.MkdirTemp("", "redlock-lab-*")
	if err != nil {
		return nil, fmt.Errorf("lab: temp dir: %w", err)
	}
	b := &processBackend{bin: bin, aof: aof, root: root, log: log}
	for i := range n {
		b.nodes = append(b.nodes, &procNode{i: i, dir: filepath.Join(root, fmt.Sprintf("node-%d", i))})
	}
	return b, nil
}

func (b *processBackend) start(ctx context.Context, i int) (string, error) {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return "", errClosed
	}
	if err := launchOnFreePort(b.log, i, func(port int) error { return b.launch(ctx, nd, port, false) }); err != nil {
		return "", err
	}
	return nd.addr(), nil
}

func (b *processBackend) restart(ctx context.Context, i int, keep bool) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return errClosed
	}
	if err := b.killLocked(nd); err != nil {
		return err
	}
	return relaunchOnPort(ctx, nd.port, func(port int) error { return b.launch(ctx, nd, port, keep) })
}

func (nd *procNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

func (nd *procNode) running() bool {
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// launch starts redis-server on port with an empty data dir (or, with
// keep, the one it had) and waits until it answers. On failure the process
// is gone and the error quotes its log.
func (b *processBackend) launch(ctx context.Context, nd *procNode, port int, keep bool) error {
	data := filepath.Join(nd.dir, "data")
	if !keep {
		if err := os.RemoveAll(data); err != nil {
			return fmt.Errorf("lab: master %d: clearing data: %w", nd.i, err)
		}
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("lab: master %d: %w", nd.i, err)
	}
	logPath := filepath.Join(nd.dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("lab: master %d: %w", nd.i, err)
	}
	args := append(b.sec.serverArgs(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--dir", data,
		"--enable-debug-command", "local",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	if b.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if b.extra != nil {
		more, err := b.extra()
		if err != nil {
			_ = logf.Close()
			return fmt.Errorf("lab: master %d: %w", nd.i, err)
		}
		args = append(args, more...)
	}
	cmd := exec.Command(b.bin, args...)
	// An *os.File is handed to the child as is: no copying goroutine.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("lab: master %d: starting %s: %w", nd.i, b.bin, err)
	}
	done := make(chan struct{})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = cmd.Wait()
		close(done)
	}()
	nd.cmd, nd.done, nd.port, nd.paused = cmd, done, port, false

	if err := waitReady(ctx, nd, b.sec); err != nil {
		_ = b.killLocked(nd)
		out := readTail(logPath)
		if strings.Contains(out, "Address already in use") {
			err = errors.Join(errAddrInUse, err)
		}
		return fmt.Errorf("lab: master %d on port %d did not start: %w; server log: %q", nd.i, port, err, out)
	}
	b.log.Debug("lab: master started", "master", nd.i, "addr", nd.addr(), "pid", cmd.Process.Pid)
	return nil
}

// waitReady polls the master with INFO until it answers with our process's
// pid (a PONG alone could come from whoever won a race for the port).
func waitReady(ctx context.Context, nd *procNode, sec *security) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	want := nd.cmd.Process.Pid
	for {
		pid, err := serverPID(ctx, nd.addr(), sec)
		if err == nil {
			if pid == want {
				return nil
			}
			return errAddrInUse
		}
		select {
		case <-nd.done:
			return errors.New("server exited")
		case <-ctx.Done():
			return fmt.Errorf("no answer: %w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// serverPID asks INFO server over a raw connection, which honours
// deadlines: with TLS when on, as the admin when there is an ACL user.
func serverPID(ctx context.Context, addr string, sec *security) (int, error) {
	nd := &net.Dialer{Timeout: 200 * time.Millisecond}
	var conn net.Conn
	var err error
	if cfg := sec.tlsConfig(); cfg != nil {
		// A TLS handshake on two loaded cores under -race can take a while.
		nd.Timeout = time.Second
		conn, err = (&tls.Dialer{NetDialer: nd, Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	req := "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"
	if sec.adminPass != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(sec.adminPass), sec.adminPass) + req
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	if sec.adminPass != "" {
		ok, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if !strings.HasPrefix(ok, "+OK") {
			return 0, fmt.Errorf("AUTH as the lab's admin: %q", strings.TrimSpace(ok))
		}
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("unexpected reply %q", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unexpected reply %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in INFO")
}

func readTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return strings.TrimSpace(string(b))
}

func (b *processBackend) pause(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.running() {
		return fmt.Errorf("lab: pause master %d: %w", i, errNotRunning)
	}
	pid := nd.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("lab: pause master %d: %w", i, err)
	}
	nd.paused = true
	return waitStopped(pid)
}

func (b *processBackend) resume(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.running() {
		nd.paused = false
		return nil
	}
	if err := syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("lab: resume master %d: %w", i, err)
	}
	nd.paused = false
	return nil
}

func (b *processBackend) kill(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return b.killLocked(nd)
}

// killLocked SIGKILLs the master's process group and waits until it has been
// reaped. SIGKILL works on a stopped process; SIGCONT follows anyway.
func (b *processBackend) killLocked(nd *procNode) error {
	if !nd.running() {
		return nil
	}
	pid := nd.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	// The group kill can miss if the group is already gone; the direct kill
	// cannot while the process is unreaped.
	_ = nd.cmd.Process.Kill()
	select {
	case <-nd.done:
	case <-time.After(exitTimeout):
		return fmt.Errorf("lab: master %d (pid %d) not reaped %v after SIGKILL", nd.i, pid, exitTimeout)
	}
	nd.paused = false
	b.log.Debug("lab: master killed", "master", nd.i, "pid", pid)
	return nil
}

func (b *processBackend) close() error {
	var errs []error
	for _, nd := range b.nodes {
		nd.mu.Lock()
		nd.closed = true
		errs = append(errs, b.killLocked(nd))
		nd.mu.Unlock()
	}
	b.wg.Wait()
	errs = append(errs, os.RemoveAll(b.root))
	return errors.Join(errs...)
}
