package redlock_test

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// monitor records the commands master addr executes (MONITOR) until stop,
// which returns them, one line each: `<time> [<db> <client>] "<name>" ...`,
// the client "lua" for a command a script ran; seen returns those
// recorded so far.
func monitor(t *testing.T, addr string) (seen, stop func() []string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR on %s: %q, %v", addr, line, err)
	}
	var mu sync.Mutex
	var lines []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, strings.TrimSpace(line))
			mu.Unlock()
		}
	})
	seen = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
	var once sync.Once
	stop = func() []string {
		once.Do(func() {
			_ = conn.Close()
			wg.Wait()
		})
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
	t.Cleanup(func() { stop() })
	return seen, stop
}

// queueCommands counts, in a MONITOR record, the ZRANK and ZREM of the
// queue of the writer key w: sent by a client (ranks, leaves) and run
// inside a script (fromScript).
func queueCommands(lines []string, w string) (ranks, leaves, fromScript int) {
	q := strings.ToLower(`"` + w + `:waiters"`)
	for _, line := range lines {
		line = strings.ToLower(line) // as sent: a script's commands are in capitals here
		rank, rem := strings.Contains(line, `] "zrank" `), strings.Contains(line, `] "zrem" `)
		switch {
		case !strings.Contains(line, q) || !rank && !rem:
		case strings.Contains(line, " lua] "):
			fromScript++
		case rank:
			ranks++
		default:
			leaves++
		}
	}
	return ranks, leaves, fromScript
}

// A writer waiting in the masters' queue, woken when the readers drain,
// asks its place and leaves the queue inside its granting script
// (rw_write.lua): no ZRANK round before its round and no ZREM round after
// it (docs/design.md §19). Before, each was a round of its own on the
// write's chain, sent to every master. A ZREM still goes, unwaited for, to
// a master whose reply had not come when the round was decided (at most a
// minority: the grant needs a majority).
func TestRWMutexWokenWriterAsksAndLeavesInItsRound(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	// A minute's backoff: the writer's round follows the drain's wake.
	l := newLocker(t, c, &redlock.Options{TTL: 30 * time.Second, Retry: redlock.RetryPolicy{MinDelay: time.Minute, MaxDelay: time.Minute}})
	rw, _ := l.RWMutex("cache")
	r, err := rw.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, rw.Lock)
	const wkey = "redlock:{cache}:w"
	queued(t, c, wkey, 1)
	waitSubscribed(t, c, wkey)
	seen := make([]func() []string, c.N())
	stops := make([]func() []string, c.N())
	for i, a := range c.Addrs() {
		seen[i], stops[i] = monitor(t, a)
	}
	if err := r.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("writer: %v", res.err)
	}
	// Off the queue everywhere: taken off by the grant, or by the ZREM to
	// a master that had not answered; a leave sent after Lock returned is
	// counted below too.
	queued(t, c, wkey, 0)
	// What the writer's Locker sent has run, and been recorded, once a
	// round of its sent after it has run on every master (each runs the
	// Locker's commands in order) and MONITOR has shown it.
	redlock.WarmUp(l)
	for i := range c.N() {
		waitFor(t, fmt.Sprintf("master %d's MONITOR past the writer's last round", i), func() bool {
			return slices.ContainsFunc(seen[i](), func(line string) bool { return strings.Contains(line, "redlock-test:warm-up") })
		})
	}
	leftBy := 0 // masters sent a ZREM by the client
	for i, stop := range stops {
		ranks, leaves, script := queueCommands(stop(), wkey)
		if ranks != 0 {
			t.Errorf("master %d: %d ZRANK of the queue sent for the woken writer; want 0 (its place asked inside rw_write.lua)", i, ranks)
		}
		if leaves > 0 {
			leftBy++
		}
		if v, _ := c.Client(i).Get(t.Context(), wkey).Result(); v == res.lk.Token() && script < 2 {
			t.Errorf("master %d granted the writer with %d queue commands inside its script; want its ZRANK and ZREM", i, script)
		}
	}
	if leftBy > c.N()/2 {
		t.Errorf("%d of %d masters were sent the writer's ZREM; want a minority at most (a majority granted, and took it off in the script)", leftBy, c.N())
	}
	if err := res.lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
