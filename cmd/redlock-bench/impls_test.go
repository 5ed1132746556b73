package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// logCapture keeps what go-redis logs.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCapture) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprintf(format, v...))
}

// TestRedsyncCloseWaitsForInFlight: redsync-failfast's Lock and Unlock
// return with commands to the other masters still in flight; closing its
// clients under them made go-redis log "Unexpected conn[N] state changed by
// hook to CLOSED, closing it" on the bench's stderr (in about 4 of 10
// rounds here before close waited for them).
func TestRedsyncCloseWaitsForInFlight(t *testing.T) {
	ms, err := startEmbedded(t.Context(), 5, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.shutdown()
	logs := &logCapture{}
	redis.SetLogger(logs)
	defer redis.SetLogger(stderrLogger{log.New(os.Stderr, "redis: ", log.LstdFlags)})

	const rounds = 200
	for r := range rounds {
		im, err := implByName("redsync-failfast").open(ms.opts, 10*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := im.lock(t.Context(), fmt.Sprintf("close-test/%d", r))
		if err == nil {
			err = h.unlock(t.Context())
		}
		if err != nil {
			t.Errorf("round %d: %v", r, err)
		}
		if err := im.close(); err != nil {
			t.Errorf("round %d: close: %v", r, err)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if n := len(logs.msgs); n > 0 {
		t.Errorf("go-redis logged %d times in %d rounds, first: %s", n, rounds, logs.msgs[0])
	}
}

// stderrLogger is go-redis's logging as it was, for the tests after this one.
type stderrLogger struct{ l *log.Logger }

func (s stderrLogger) Printf(_ context.Context, format string, v ...any) { s.l.Printf(format, v...) }
