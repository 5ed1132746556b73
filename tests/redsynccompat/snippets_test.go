package redsynccompat_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The code of docs/migrating-from-redsync.md, verbatim between the
// "snippet" markers, run against real masters by TestMigrationSnippets.

// snippet: before
func withRedsync(ctx context.Context, clients []*redis.Client) error {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	rs := redsync.New(pools...)

	m := rs.NewMutex("invoice:42", redsync.WithExpiry(8*time.Second), redsync.WithTries(32))
	if err := m.LockContext(ctx); err != nil {
		return err // redsync.ErrFailed, or the last try's error (*redsync.ErrTaken, ...)
	}
	defer m.UnlockContext(ctx)
	// ... work until m.Until() ...
	if ok, err := m.ExtendContext(ctx); !ok {
		return fmt.Errorf("extend: %w", err)
	}
	return nil
}

// end snippet

// snippet: during
func duringMigration(ctx context.Context, clients []*redis.Client) error {
	masters := make([]redis.UniversalClient, len(clients)) // the same masters as the redsync pools
	for i, c := range clients {
		masters[i] = c
	}
	locker, err := redlock.New(masters, &redlock.Options{
		RedsyncKeys: true,            // the key of "invoice:42" is "invoice:42", as with redsync
		TTL:         8 * time.Second, // redsync.WithExpiry(8*time.Second)
		Retry: redlock.RetryPolicy{ // redsync.WithTries(32), delays near redsync's 50–250ms
			MaxAttempts: 32, MinDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond,
		},
	})
	if err != nil {
		return err // wraps redlock.ErrInvalid
	}
	defer locker.Close() // one Locker per process, shared by every goroutine and resource

	lock, err := locker.Lock(ctx, "invoice:42")
	if err != nil {
		return err // wraps redlock.ErrNotAcquired, and ctx's error if ctx ended
	}
	defer lock.Unlock(ctx)
	// ... work until lock.Deadline() ...
	if err := lock.Extend(ctx); err != nil {
		return err // wraps redlock.ErrLost
	}
	return nil
}

// end snippet

// snippet: prefix
func withPrefix(masters []redis.UniversalClient) (*redlock.Locker, error) {
	// redsync code that called rs.NewMutex("app:lock:" + id) ...
	return redlock.New(masters, &redlock.Options{RedsyncKeys: true, KeyPrefix: "app:lock:"})
	// ... calls locker.Lock(ctx, id): the key is "app:lock:" + id.
}

// end snippet

// snippet: delayfunc
// lockWithDelays is redsync's WithTries(tries) + WithRetryDelayFunc(delay).
func lockWithDelays(ctx context.Context, locker *redlock.Locker, resource string, tries int, delay func(try int) time.Duration) (*redlock.Lock, error) {
	for try := 1; ; try++ {
		lock, err := locker.TryLock(ctx, resource) // one round, every master released on failure
		if err == nil || !errors.Is(err, redlock.ErrNotAcquired) || ctx.Err() != nil || try == tries {
			return lock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %w)", context.Cause(ctx), err)
		case <-time.After(delay(try)):
		}
	}
}

// end snippet

// snippet: errors
func describe(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "ctx ended" // redsync: ErrFailed
	case errors.Is(err, redlock.ErrHeld):
		return "taken" // redsync: *ErrTaken (also wraps ErrNotAcquired)
	case errors.Is(err, redlock.ErrNotAcquired):
		return "not acquired" // errors.As gives a *redlock.Error: what each master did
	case errors.Is(err, redlock.ErrLost):
		return "lost" // Extend or Unlock: not ours any more; redsync: ErrExtendFailed, (false, err)
	case errors.Is(err, redlock.ErrClosed):
		return "closed" // the Locker was closed
	case errors.Is(err, redlock.ErrInvalid):
		return "invalid" // bad options or resource name
	}
	return "other"
}

// end snippet

// snippet: after
func afterMigration(masters []redis.UniversalClient) (*redlock.Locker, error) {
	// Only once nobody holds a lock under the redsync naming (see below).
	return redlock.New(masters, &redlock.Options{TTL: 8 * time.Second}) // "invoice:42" → "redlock:{invoice:42}"
}

// end snippet

// snippet: do
func withDo(ctx context.Context, locker *redlock.Locker) error {
	return locker.Do(ctx, "invoice:42", func(ctx context.Context) error {
		// Extended in the background; ctx ends (cause redlock.ErrLost) by the deadline.
		return nil
	})
}

// end snippet

func TestMigrationSnippets(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	clients := make([]*redis.Client, c.N())
	for i := range clients {
		clients[i] = c.Client(i)
	}
	if err := withRedsync(ctx, clients); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := duringMigration(ctx, clients); err != nil {
		t.Fatalf("during: %v", err)
	}

	lp, err := withPrefix(c.Clients())
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	lk, err := lp.TryLock(ctx, "7")
	if err != nil {
		t.Fatal(err)
	}
	onEveryMaster(t, c, "app:lock:7", lk.Token())
	lk.Unlock(ctx)

	// While redsync holds the name: "taken", after tries of TryLock.
	rs := newRedsync(t, c)
	m := rs.NewMutex("invoice:42", redsync.WithExpiry(8*time.Second))
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	compat := newLocker(t, c, redlock.Options{RedsyncKeys: true})
	tries := 0
	_, err = lockWithDelays(ctx, compat, "invoice:42", 3, func(int) time.Duration { tries++; return time.Millisecond })
	if got := describe(err); got != "taken" || tries != 2 {
		t.Fatalf("delayfunc while redsync holds the name: %v (%s) after %d delays; want taken after 2", err, got, tries)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := compat.Lock(cctx, "invoice:42"); describe(err) != "ctx ended" {
		t.Fatalf("cancelled Lock: %v (%s)", err, describe(err))
	}
	if _, err := compat.Lock(ctx, "jobs:fence"); describe(err) != "invalid" {
		t.Fatalf("bad name: %v (%s)", err, describe(err))
	}
	if ok, err := m.UnlockContext(ctx); !ok {
		t.Fatal(err)
	}
	lk, err = lockWithDelays(ctx, compat, "invoice:42", 3, func(int) time.Duration { return time.Millisecond })
	if describe(err) != "ok" {
		t.Fatal(err)
	}
	lk.Unlock(ctx)
	if err := lk.Extend(ctx); describe(err) != "lost" {
		t.Fatalf("Extend after Unlock: %v (%s)", err, describe(err))
	}
	if err := withDo(ctx, compat); err != nil {
		t.Fatal(err)
	}

	la, err := afterMigration(c.Clients())
	if err != nil {
		t.Fatal(err)
	}
	lk, err = la.TryLock(ctx, "invoice:42")
	if err != nil {
		t.Fatal(err)
	}
	onEveryMaster(t, c, "redlock:{invoice:42}", lk.Token())
	lk.Unlock(ctx)
	la.Close()
	if _, err := la.TryLock(ctx, "invoice:42"); describe(err) != "closed" {
		t.Fatalf("after Close: %v (%s)", err, describe(err))
	}
}

// The doc's Go blocks are the tested code: each "<!-- snippet: NAME -->"
// is followed by a ```go block holding the text between NAME's markers
// here, and every snippet here appears in the doc.
func TestMigrationDocMatchesSnippets(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migrating-from-redsync.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("snippets_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)// snippet: (\w+)\n(.*?)\n// end snippet`).FindAllSubmatch(src, -1) {
		code[string(m[1])] = strings.TrimRight(string(m[2]), "\n")
	}
	blocks := regexp.MustCompile("(?s)<!-- snippet: (\\w+) -->\n\n```go\n(.*?)\n```").FindAllSubmatch(doc, -1)
	if n := strings.Count(string(doc), "<!-- snippet:"); n != len(blocks) {
		t.Fatalf("%d snippet markers in the doc, %d followed by a go block", n, len(blocks))
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		name := string(b[1])
		want, ok := code[name]
		switch {
		case !ok:
			t.Errorf("the doc's snippet %q is not in snippets_test.go", name)
		case string(b[2]) != want:
			t.Errorf("the doc's snippet %q differs from snippets_test.go:\n--- doc\n%s\n--- test\n%s", name, b[2], want)
		}
		seen[name] = true
	}
	for name := range code {
		if !seen[name] {
			t.Errorf("snippet %q is not in the doc", name)
		}
	}
}
