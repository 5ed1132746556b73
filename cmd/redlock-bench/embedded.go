package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Embedded masters run in a child process: this binary, re-executed with
// embeddedChildEnv set (runEmbeddedChild, embedded_child.go). miniredis
// builds a new Lua state for every script call, and in the bench's own
// process that garbage was collected with the clients' heap and ranked
// the implementations by the size of their heaps (docs/bench.md, "On
// embedded masters"). In a process of their own the masters' garbage and
// CPU are theirs: the clients' CPU and -cpuprofile are the clients'.
//
// The child prints embeddedReadyWord and the masters' addresses on its
// stdout, then obeys one command a line on its stdin ("pause I",
// "resume I", "cpu", "close"), answering each with "ok" (for cpu, "ok"
// and its CPU time in µs) or "error: ...". Its
// stdin closing ends it (the bench ended without closing it); on Linux the
// kernel also SIGKILLs it when the bench dies (childProcAttr).
const (
	embeddedChildEnv  = "REDLOCK_BENCH_EMBEDDED_MASTERS"
	embeddedReadyWord = "masters"
	// embeddedBound is how long the bench waits for the child to start,
	// to answer a command, or to exit once closed.
	embeddedBound = 10 * time.Second
)

// embeddedNote is the embedded masters' note in the report's header.
const embeddedNote = "EMBEDDED miniredis masters in a child process of the bench: numbers show library overhead, " +
	"not network or a real server; client CPU is the clients' alone"

// startEmbedded starts n embedded masters in a child process; stderr gets
// a line if the child ends before it is closed.
func startEmbedded(ctx context.Context, n int, stderr io.Writer) (*masters, error) {
	p, addrs, err := startEmbeddedProc(ctx, n, stderr)
	if err != nil {
		return nil, err
	}
	m := &masters{
		info: Masters{Kind: "embedded", N: n, Addrs: addrs,
			StallMethod: "the node's mutex held by the masters' process (every command waits, connections stay open)",
			Note:        embeddedNote},
		pause: func(ctx context.Context, i int, _ time.Duration) error {
			_, err := p.do(ctx, "pause "+strconv.Itoa(i))
			return err
		},
		resume: func(i int) error {
			_, err := p.do(context.Background(), "resume "+strconv.Itoa(i))
			return err
		},
		cpu:   p.cpu,
		close: p.close,
	}
	m.opts = plainOptions(addrs)
	m.admin = newClients(m.opts)
	return m, nil
}

// embeddedProc is the embedded masters' process, seen from the bench.
type embeddedProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   childLog // the first 4 KiB of its stderr

	lines   chan string   // its stdout, a line at a time; closed at EOF
	exited  chan struct{} // closed once it exited and was waited for
	waitErr error         // cmd.Wait's, set before exited is closed

	mu       sync.Mutex // one command at a time
	broken   error      // set once a command failed for want of the child
	closing  atomic.Bool
	once     sync.Once
	closeErr error
}

// startEmbeddedProc starts the child and waits for its masters'
// addresses; on error the child has exited.
func startEmbeddedProc(ctx context.Context, n int, stderr io.Writer) (*embeddedProc, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("embedded masters: finding this binary to re-execute: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), embeddedChildEnv+"="+strconv.Itoa(n))
	cmd.SysProcAttr = childProcAttr()
	p := &embeddedProc{cmd: cmd, lines: make(chan string, 4), exited: make(chan struct{})}
	cmd.Stderr = &p.log
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("embedded masters: starting their process: %w", err)
	}
	go p.watch(stdout, stderr)
	addrs, err := p.awaitReady(ctx, n)
	if err != nil {
		p.kill()
		return nil, nil, err
	}
	return p, addrs, nil
}

// watch passes the child's stdout on to lines, then waits for the child
// (after every read, as exec.Cmd requires) and says on stderr if it ended
// before the bench closed it.
func (p *embeddedProc) watch(stdout io.Reader, stderr io.Writer) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		select {
		case p.lines <- sc.Text():
		default: // nobody asked: an answer to a command that timed out
		}
	}
	close(p.lines)
	p.waitErr = p.cmd.Wait()
	if !p.closing.Load() {
		fmt.Fprintf(stderr, "redlock-bench: the embedded masters' process ended during the run (%s)\n", p.withStderr(p.exitState()))
	}
	close(p.exited)
}

// awaitReady reads the child's first line: embeddedReadyWord and n
// addresses.
func (p *embeddedProc) awaitReady(ctx context.Context, n int) ([]string, error) {
	t := time.NewTimer(embeddedBound)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		f := strings.Fields(l)
		if ok && len(f) == n+1 && f[0] == embeddedReadyWord {
			return f[1:], nil
		}
		if !ok {
			<-p.exited
			return nil, fmt.Errorf("embedded masters: their process did not start (%s)", p.describeExit())
		}
		return nil, fmt.Errorf("embedded masters: their process said %q, not %d addresses", l, n)
	case <-t.C:
		return nil, fmt.Errorf("embedded masters: their process did not start within %v (%s)", embeddedBound, p.stderrText())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// do sends one command and waits for its answer, returning what follows
// its "ok". A child that does not answer (it ended, or took longer than
// embeddedBound, or ctx ended first) is killed, and every later command
// fails at once.
func (p *embeddedProc) do(ctx context.Context, command string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return "", p.broken
	}
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		return "", p.fail(command, err)
	}
	t := time.NewTimer(embeddedBound)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", p.fail(command, errors.New("the process ended"))
		}
		word, rest, _ := strings.Cut(l, " ")
		if word != "ok" {
			return "", fmt.Errorf("embedded masters: %s: %s", command, l)
		}
		return rest, nil
	case <-t.C:
		return "", p.fail(command, fmt.Errorf("no answer within %v", embeddedBound))
	case <-ctx.Done():
		return "", p.fail(command, ctx.Err())
	}
}

// cpu is the masters' process's CPU time so far.
func (p *embeddedProc) cpu(ctx context.Context) (time.Duration, error) {
	s, err := p.do(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("embedded masters: cpu: %q is not a count of µs", s)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// fail marks the child broken with err, kills it, and returns the error
// with what it said on stderr. p.mu is held.
func (p *embeddedProc) fail(command string, err error) error {
	p.kill()
	p.broken = fmt.Errorf("embedded masters: %s: %w (%s)", command, err, p.describeExit())
	return p.broken
}

// kill SIGKILLs the child unless it exited, and waits until it has.
func (p *embeddedProc) kill() {
	p.closing.Store(true)
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// close has the child close its masters and exit, and waits for it; a
// child that does not is killed. Its error says how the child ended when
// that was not a clean exit.
func (p *embeddedProc) close() error {
	p.once.Do(func() {
		p.closing.Store(true)
		_, err := p.do(context.Background(), "close")
		_ = p.stdin.Close()
		t := time.NewTimer(embeddedBound)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			p.kill()
		}
		if err == nil && p.waitErr != nil {
			err = fmt.Errorf("embedded masters: their process: %s", p.describeExit())
		}
		p.closeErr = err
	})
	return p.closeErr
}

// describeExit says how the child ended (if it has) and what it wrote on
// stderr.
func (p *embeddedProc) describeExit() string {
	select {
	case <-p.exited:
		return p.withStderr(p.exitState())
	default:
		return p.withStderr("still running")
	}
}

// exitState is how the child ended; only once it was waited for.
func (p *embeddedProc) exitState() string {
	if p.waitErr != nil {
		return p.waitErr.Error()
	}
	return "exit status 0"
}

func (p *embeddedProc) withStderr(state string) string {
	if s := p.stderrText(); s != "" {
		return state + "; its stderr: " + s
	}
	return state
}

func (p *embeddedProc) stderrText() string { return strings.TrimSpace(p.log.String()) }

// childLog keeps the first 4 KiB a child writes, for error messages.
type childLog struct {
	mu sync.Mutex
	b  []byte
}

func (l *childLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, b[:min(len(b), 4096-len(l.b))]...)
	return len(b), nil
}

func (l *childLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
