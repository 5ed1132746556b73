package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// conns is one command's connections to the masters.
type conns struct {
	r       *resolved
	clients []*redis.Client
	stderr  io.Writer
	quiet   bool
	mu      sync.Mutex // serializes writes to stderr
}

func newConns(r *resolved, stderr io.Writer, quiet bool) *conns {
	s := &conns{r: r, stderr: stderr, quiet: quiet}
	for _, m := range r.masters {
		s.clients = append(s.clients, redis.NewClient(m.opts))
	}
	return s
}

func (s *conns) close() {
	for _, c := range s.clients {
		c.Close()
	}
}

// progressf writes a progress line to stderr unless -q.
func (s *conns) progressf(format string, a ...any) {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.stderr, format+"\n", a...)
}

// each runs f for every master at once (an errgroup) and returns once all
// have returned, with each master's error; it reports progress as masters
// answer. A master's error is its report, not the group's: one master
// down must not stop the others' answers. An interrupt (ctx) stops all.
func (s *conns) each(ctx context.Context, what string, f func(ctx context.Context, i int, c *redis.Client) error) []error {
	n := len(s.clients)
	s.progressf("%s: asking %d masters (timeout %v each)…", what, n, s.r.timeout)
	errs := make([]error, n)
	var g errgroup.Group
	for i, c := range s.clients {
		g.Go(func() error {
			start := time.Now()
			errs[i] = f(ctx, i, c)
			if errs[i] != nil {
				s.progressf("  %s: %s", s.r.masters[i].name, describe(errs[i], s.r.timeout))
			} else {
				s.progressf("  %s: ok (%v)", s.r.masters[i].name, time.Since(start).Round(100*time.Microsecond))
			}
			return nil
		})
	}
	_ = g.Wait() // every goroutine returns nil: the errors are in errs
	return errs
}

// req bounds one request to a master.
func (s *conns) req(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.r.timeout)
}

// quietLogger silences go-redis's own log lines (failed dials): the
// commands report every master's error themselves.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// describe says what went wrong with a master in an operator's words.
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("unreachable: no answer within %v (stopped, overloaded or cut off?)", timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unreachable: connection refused (down, or the wrong port?)"
	case errors.As(err, &ne):
		return "unreachable: " + err.Error()
	}
	return "error: " + err.Error()
}
