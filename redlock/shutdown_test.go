package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// Shutdown with three kept locks (two Holds and a Do) and a plain one:
// every kept lock's Done has closed when its release is about to be sent,
// with its keys still on every master (a test hook runs there, on the
// releasing goroutine), and afterwards no key is left on any master, Do
// has returned, and new acquisitions fail with ErrClosed.
func TestShutdownReleasesHeldLocks(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, &redlock.Options{MasterTimeout: 400 * time.Millisecond})
	ctx := t.Context()
	resources := []string{"sd-hold-a", "sd-hold-b", "sd-do", "sd-plain"}
	var helds []*redlock.Lock
	for _, r := range resources[:2] {
		h, err := redlock.Hold(l, ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		helds = append(helds, h)
	}
	doCtx := make(chan context.Context, 1)
	doErr := make(chan error, 1)
	go func() {
		doErr <- l.Do(ctx, "sd-do", func(ctx context.Context) error {
			doCtx <- ctx
			<-ctx.Done()
			return errors.New("fn stopped")
		})
	}()
	dctx := <-doCtx
	plain, err := l.TryLock(ctx, "sd-plain")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resources {
		waitFor(t, "the keys of "+r+" on all 5 masters", func() bool { return 5-countValue(keyState(t, c, r), "") == 5 })
	}
	fresh := make([]*redis.Client, c.N())
	for i, a := range c.Addrs() {
		fresh[i] = redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { fresh[i].Close() })
		if err := fresh[i].Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	onMasters := func(resource string) int {
		n := 0
		for _, f := range fresh {
			if v, err := f.Exists(ctx, "redlock:{"+resource+"}").Result(); err == nil && v == 1 {
				n++
			}
		}
		return n
	}
	// Just before each release is sent (the hook runs on the releasing
	// goroutine, so the release waits for it): a kept lock's Done has
	// closed, and its keys are still on every master.
	done := map[string]<-chan struct{}{resources[0]: helds[0].Done(), resources[1]: helds[1].Done(), resources[2]: dctx.Done()}
	var mu sync.Mutex
	checked := map[string]bool{}
	redlock.SetBeforeRelease(l, func(resource string) {
		d, kept := done[resource]
		if !kept {
			return
		}
		select {
		case <-d:
		default:
			t.Errorf("%s: its release was about to be sent before its Done closed", resource)
		}
		if n := onMasters(resource); n != 5 {
			t.Errorf("%s: before its release, %d of 5 masters had its key; want all 5", resource, n)
		}
		mu.Lock()
		checked[resource] = true
		mu.Unlock()
	})

	if err := l.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	mu.Lock()
	if len(checked) != 3 {
		t.Errorf("releases checked before they were sent: %v, want the 3 kept locks'", checked)
	}
	mu.Unlock()
	for _, r := range resources {
		if n := onMasters(r); n != 0 {
			t.Errorf("%s: key on %d masters after Shutdown", r, n)
		}
	}
	for i, h := range helds {
		if !errors.Is(h.Err(), context.Canceled) {
			t.Errorf("held %d: Err %v, want context.Canceled", i, h.Err())
		}
	}
	// Do's own release races Shutdown's: fn's error, joined with
	// ErrUnlocked or ErrClosed when Shutdown's came first.
	if err := <-doErr; err == nil || !strings.Contains(err.Error(), "fn stopped") || errors.Is(err, redlock.ErrLost) {
		t.Errorf("Do after Shutdown: %v, want fn's error", err)
	}
	if err := plain.Unlock(ctx); !errors.Is(err, redlock.ErrUnlocked) && !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Unlock of a lock Shutdown released: %v", err)
	}
	if _, err := l.TryLock(ctx, "sd-after"); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("TryLock after Shutdown: %v, want ErrClosed", err)
	}
	if err := l.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}
