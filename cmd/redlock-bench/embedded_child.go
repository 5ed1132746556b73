package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// The embedded masters' process (embedded.go has the bench's side).

// runEmbeddedChild starts arg (a count) masters, prints their addresses,
// and obeys the commands on stdin until "close" or its end; then it closes
// the masters.
func runEmbeddedChild(arg string, stdin io.Reader, stdout, stderr io.Writer) int {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		fmt.Fprintf(stderr, "redlock-bench masters: %s=%q is not a count of masters\n", embeddedChildEnv, arg)
		return 2
	}
	e, err := newEmbedded(n)
	if err != nil {
		fmt.Fprintf(stderr, "redlock-bench masters: %v\n", err)
		return 1
	}
	addrs := make([]string, n)
	for i, m := range e.nodes {
		addrs[i] = m.Addr()
	}
	if _, err := fmt.Fprintln(stdout, embeddedReadyWord, strings.Join(addrs, " ")); err != nil {
		_ = e.close()
		return 1
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if sc.Text() == "close" {
			break
		}
		if _, err := fmt.Fprintln(stdout, e.obey(sc.Text())); err != nil {
			break
		}
	}
	_ = e.close()
	// Answered once the masters are closed: the bench then knows their
	// ports are free.
	fmt.Fprintln(stdout, "ok")
	return 0
}

// obey runs one command ("pause I", "resume I", or "cpu": this process's
// CPU time so far, in µs) and returns its answer.
func (e *embedded) obey(line string) string {
	if line == "cpu" {
		d, err := processCPU()
		if err != nil {
			return "error: " + err.Error()
		}
		return "ok " + strconv.FormatInt(d.Microseconds(), 10)
	}
	verb, arg, _ := strings.Cut(line, " ")
	i, err := strconv.Atoi(arg)
	switch {
	case verb != "pause" && verb != "resume":
		return fmt.Sprintf("error: unknown command %q", line)
	case err != nil || i < 0 || i >= len(e.nodes):
		return fmt.Sprintf("error: no master %q (there are %d)", arg, len(e.nodes))
	case verb == "pause":
		e.pause(i)
	default:
		e.resume(i)
	}
	return "ok"
}

// embedded is n miniredis servers, in the embedded masters' process.
//
// Two things a real master does that miniredis does not, and how the bench
// makes up for them:
//   - Keys do not expire by themselves (miniredis moves time only on
//     FastForward), so a ticker fast-forwards every running node by the real
//     time that passed: a lock left behind expires as on Redis.
//   - There is no process to SIGSTOP, so a node is stopped by holding its
//     exported mutex (miniredis.Miniredis embeds sync.Mutex, which every
//     command takes): connections stay open and every command waits, as
//     with SIGSTOP.
type embedded struct {
	nodes []*miniredis.Miniredis

	mu     sync.Mutex // guards paused; taken before a node's own mutex
	paused []bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func newEmbedded(n int) (*embedded, error) {
	e := &embedded{paused: make([]bool, n), stop: make(chan struct{})}
	for i := range n {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			for _, o := range e.nodes {
				o.Close()
			}
			return nil, fmt.Errorf("starting embedded master %d: %w", i, err)
		}
		e.nodes = append(e.nodes, m)
	}
	e.wg.Go(e.expire)
	return e, nil
}

// expireEvery is how often embedded masters' clocks are moved on; keys
// expire at most this late.
const expireEvery = 50 * time.Millisecond

func (e *embedded) expire() {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			d := now.Sub(last)
			last = now
			e.mu.Lock()
			for i, m := range e.nodes {
				// A stopped node's clock is not moved: its mutex is ours,
				// and a SIGSTOPped redis-server does not expire keys either
				// (its clock catches up on resume; this one does not,
				// which only keeps leftovers a little longer).
				if !e.paused[i] {
					m.FastForward(d)
				}
			}
			e.mu.Unlock()
		}
	}
}

func (e *embedded) pause(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.paused[i] {
		e.paused[i] = true
		e.nodes[i].Lock()
	}
}

func (e *embedded) resume(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused[i] {
		e.paused[i] = false
		e.nodes[i].Unlock()
	}
}

func (e *embedded) close() error {
	for i := range e.nodes {
		e.resume(i)
	}
	close(e.stop)
	e.wg.Wait()
	for _, m := range e.nodes {
		m.Close()
	}
	return nil
}
