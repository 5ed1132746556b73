package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// One rule, wherever a lock can end (docs/design.md §8): a lock whose
// deadline has passed, or that was released, is over, and everything made
// from it afterwards is born over. These tests hold it where it broke: a
// context first made after the deadline, Unlock and Shutdown behind the
// keeper's round, Campaign racing Shutdown, Unlock after Close, and the
// errors Do and Resign return.

// sleepPast sleeps until every deadline of lks has passed (on the
// monotonic clock, as Deadline is read).
func sleepPast(lks ...*redlock.Lock) {
	var last time.Time
	for _, lk := range lks {
		if d := lk.Deadline(); d.After(last) {
			last = d
		}
	}
	time.Sleep(time.Until(last) + time.Millisecond)
}

// bornOver checks that everything made from lk now is over, with cause
// want: Context done on return, Err and Done agreeing, Keep failing.
func bornOver(t *testing.T, what string, lk *redlock.Lock, want error) {
	t.Helper()
	if err := context.Cause(lk.Context()); !errors.Is(err, want) {
		t.Errorf("%s: Context() cause %v on return, want %v", what, err, want)
	}
	select {
	case <-lk.Done():
	default:
		t.Errorf("%s: Done open", what)
	}
	if lk.Err() == nil {
		t.Errorf("%s: Err nil", what)
	}
	if lk.Valid() {
		t.Errorf("%s: Valid", what)
	}
	if err := lk.Keep(); err == nil {
		t.Errorf("%s: Keep returned nil", what)
	}
}

// Past its deadline, with another Locker holding the resource, a lock's
// first Context (or one made after a failed Extend) is born cancelled
// with ErrLost, Keep returns ErrLost, and Do never starts fn: for 100
// mutex locks, permits and write locks each.
func TestContextMadeAfterDeadlineIsBornLost(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	opts := &redlock.Options{TTL: 300 * time.Millisecond, MasterTimeout: 100 * time.Millisecond}
	a := newLocker(t, c, opts)
	b := newLocker(t, c, opts)
	const runs = 100
	kinds := map[string]func(l *redlock.Locker, i int) (*redlock.Lock, error){
		"mutex": func(l *redlock.Locker, i int) (*redlock.Lock, error) {
			return l.TryLock(ctx, "born-lost-"+strconv.Itoa(i))
		},
		"permit": func(l *redlock.Locker, i int) (*redlock.Lock, error) {
			s, err := l.Semaphore("born-lost-sem-"+strconv.Itoa(i), 1)
			if err != nil {
				return nil, err
			}
			return s.TryAcquire(ctx)
		},
		"write lock": func(l *redlock.Locker, i int) (*redlock.Lock, error) {
			rw, err := l.RWMutex("born-lost-rw-" + strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			return rw.TryLock(ctx)
		},
	}
	for kind, take := range kinds {
		t.Run(kind, func(t *testing.T) {
			lks := make([]*redlock.Lock, runs)
			for i := range lks {
				lk, err := take(a, i)
				if err != nil {
					t.Fatal(err)
				}
				lks[i] = lk
			}
			sleepPast(lks...)
			for i, lk := range lks {
				// The keys outlive the deadline by the drift allowance:
				// the other Locker tries until they have expired.
				var theirs *redlock.Lock
				waitFor(t, "the other Locker's take of run "+strconv.Itoa(i), func() bool {
					var err error
					theirs, err = take(b, i)
					return err == nil
				})
				if i%2 == 1 { // half of them: a failed Extend first
					if err := lk.Extend(ctx); !errors.Is(err, redlock.ErrLost) {
						t.Errorf("run %d: Extend past the deadline: %v, want ErrLost", i, err)
					}
				}
				bornOver(t, "run "+strconv.Itoa(i), lk, redlock.ErrLost)
				if err := lk.Keep(); !errors.Is(err, redlock.ErrLost) {
					t.Errorf("run %d: Keep %v, want ErrLost", i, err)
				}
				_ = theirs.Unlock(ctx)
			}
		})
	}

	t.Run("Do", func(t *testing.T) {
		opts := &redlock.Options{TTL: 150 * time.Millisecond, MasterTimeout: 50 * time.Millisecond}
		d := newLocker(t, c, opts)
		var mu sync.Mutex
		var pending []string
		redlock.SetAfterLock(d, func() {
			// Paused between Lock and its keeping until past the
			// deadline, while the other Locker takes the resource: it
			// does once the keys have expired on a majority, each set
			// after the lock's Start and living its TTL, so the
			// deadline (Start + TTL − drift) has passed by then.
			mu.Lock()
			r := pending[0]
			pending = pending[1:]
			mu.Unlock()
			var lk *redlock.Lock
			var err error
			poll(5*time.Second, func() bool { // until the keys expired
				lk, err = b.TryLock(ctx, r)
				return err == nil
			})
			if err != nil {
				t.Errorf("%s: the other Locker: %v", r, err)
				return
			}
			t.Cleanup(func() { _ = lk.Unlock(context.Background()) })
		})
		var wg sync.WaitGroup
		for i := range 30 {
			r := "born-lost-do-" + strconv.Itoa(i)
			wg.Go(func() {
				mu.Lock()
				pending = append(pending, r)
				mu.Unlock()
				err := d.Do(ctx, r, func(ctx context.Context) error {
					t.Errorf("%s: fn ran on a lock past its deadline (ctx err %v)", r, ctx.Err())
					return nil
				})
				if !errors.Is(err, redlock.ErrLost) {
					t.Errorf("%s: Do %v, want ErrLost", r, err)
				}
			})
			wg.Wait() // one at a time: the hook pops in order
		}
	})
}

// Unlock after Close: it returns ErrClosed (the keys stay until their
// TTL), and the lock is over all the same: Valid false, a context made
// after it born cancelled, Keep failing with ErrClosed.
func TestUnlockAfterCloseEndsTheLock(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	l := newLocker(t, c, nil)
	const runs = 100
	lks := make([]*redlock.Lock, runs)
	for i := range lks {
		lk, err := l.TryLock(ctx, "unlock-after-close-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		lks[i] = lk
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, lk := range lks {
		if err := lk.Unlock(ctx); !errors.Is(err, redlock.ErrClosed) {
			t.Errorf("run %d: Unlock after Close: %v, want ErrClosed", i, err)
		}
		bornOver(t, "run "+strconv.Itoa(i), lk, context.Canceled)
		if err := lk.Keep(); !errors.Is(err, redlock.ErrClosed) {
			t.Errorf("run %d: Keep after Close and Unlock: %v, want ErrClosed", i, err)
		}
	}
}

// keeperAllowance is the scheduling allowance, beyond MasterTimeout, that
// Unlock and Shutdown get while the keeper's round is in flight: far less
// than the round's own wait (keepWait, a quarter of the 60 s TTL), so a
// call that waited for the round cannot pass, and generous for a loaded
// machine.
const keeperAllowance = 2 * time.Second

// With a majority stalled and the keeper's extension in flight (its wait a
// quarter of the time left, 15 s), Unlock, Shutdown, Err, Deadline and
// Valid do not wait for it: Unlock and Shutdown return within
// MasterTimeout plus keeperAllowance, Done closed on their return; no
// release is sent before Done closes (Unlock's rule, unchanged).
func TestUnlockAndShutdownDoNotWaitForTheKeeper(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const nt = 50 * time.Millisecond
	opts := &redlock.Options{TTL: time.Minute, MasterTimeout: nt}
	for _, path := range []string{"alone", "batch"} {
		for _, end := range []string{"Unlock", "Shutdown"} {
			t.Run(path+"/"+end, func(t *testing.T) {
				ctx := t.Context()
				l := newLocker(t, c, opts)
				lk, err := l.TryLock(ctx, "keeper-holds-"+path+"-"+end)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Keep(); err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					if err := c.Pause(i); err != nil {
						t.Fatal(err)
					}
				}
				defer c.ResumeAll()
				extended := make(chan struct{})
				go func() {
					defer close(extended)
					if path == "alone" {
						redlock.KeeperExtendOnce(lk)
					} else {
						redlock.KeeperExtendBatch(lk)
					}
				}()
				waitFor(t, "the keeper's round in flight", func() bool { return redlock.KeeperBusy(lk) })
				began := time.Now()
				if err := lk.Err(); err != nil {
					t.Errorf("Err during the round: %v", err)
				}
				if !lk.Valid() || lk.Deadline().IsZero() {
					t.Error("Valid or Deadline wrong during the round")
				}
				switch end {
				case "Unlock":
					uctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					_ = lk.Unlock(uctx)
					cancel()
				case "Shutdown":
					sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					_ = l.Shutdown(sctx)
					cancel()
				}
				took := time.Since(began)
				select {
				case <-lk.Done():
				default:
					t.Errorf("%s returned with Done open", end)
				}
				if took > nt+keeperAllowance {
					t.Errorf("%s took %v with the keeper's round in flight, want at most %v", end, took, nt+keeperAllowance)
				}
				c.ResumeAll()
				<-extended
			})
		}
	}
}

// Campaign racing Shutdown: a Shutdown between the Keep of the
// leadership and the publishing of its value makes Campaign fail with
// ErrClosed (our own Shutdown released it), never ErrLost, and returns no
// leadership.
func TestCampaignRacingShutdownIsClosed(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	const runs = 500
	for i := range runs {
		l := newLockerQuiet(t, c)
		e, err := l.Election("race-shutdown")
		if err != nil {
			t.Fatal(err)
		}
		// Shutdown begins between the Keep and the publish, from another
		// goroutine (it waits for the Campaign, an operation in progress,
		// before it returns).
		shut := make(chan error, 1)
		redlock.SetAfterKeep(l, func() {
			go func() { shut <- l.Shutdown(ctx) }()
			for !redlock.Closing(l) {
				runtime.Gosched()
			}
		})
		lk, err := e.Campaign(ctx, "v"+strconv.Itoa(i))
		if err := <-shut; err != nil {
			t.Fatalf("run %d: Shutdown: %v", i, err)
		}
		if lk != nil {
			t.Fatalf("run %d: Campaign returned a leadership after Shutdown", i)
		}
		if !errors.Is(err, redlock.ErrClosed) || errors.Is(err, redlock.ErrLost) {
			t.Fatalf("run %d: Campaign %v, want ErrClosed alone", i, err)
		}
	}
}

// newLockerQuiet is a Locker closed at the end of the test, without the
// warm-up round (a test that makes hundreds of them).
func newLockerQuiet(t *testing.T, c *lab.Masters) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(c.Clients(), &redlock.Options{MasterTimeout: time.Second, Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Do of an fn that unlocks its own lock and succeeds returns nil (as
// Shutdown leaves out ErrUnlocked in the same case); Resign after the
// leadership was lost says this Election does not lead (ErrUnlocked).
func TestDoAndResignErrors(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	ctx := t.Context()
	l := newLocker(t, c, &redlock.Options{TTL: 300 * time.Millisecond, MasterTimeout: 100 * time.Millisecond, Fencing: true})
	err := l.Do(ctx, "do-unlocks-itself", func(ctx context.Context) error {
		lk, _ := redlock.FromContext(ctx)
		return lk.Unlock(ctx)
	})
	if err != nil {
		t.Errorf("Do whose fn unlocked its lock: %v, want nil", err)
	}

	e, err := l.Election("resign-after-loss")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := e.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	// Lost: the leadership's keys go (as a restart or an operator would
	// make them go), and the keeper finds no majority.
	for i := range c.N() {
		c.Client(i).FlushAll(ctx)
	}
	<-lead.Done()
	if err := e.Resign(ctx); !errors.Is(err, redlock.ErrUnlocked) {
		t.Errorf("Resign after the leadership was lost: %v, want ErrUnlocked", err)
	}
}

// Close leaves no goroutine behind, even with locks kept: nothing can
// extend them once it has begun (§9), so the keeper's loop returns then
// instead of sleeping until their next extension falls due (two thirds
// of a 30 s window away here), and the locks end by their own loss
// timers, which need no goroutine.
func TestCloseEndsTheKeeper(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ignore := goleak.IgnoreCurrent()
	l := newLocker(t, c, &redlock.Options{TTL: 30 * time.Second})
	lk, err := l.TryLock(t.Context(), "kept-at-close")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Keep(); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(ignore); err == nil || !strings.Contains(err.Error(), "(*keeper).run") {
		t.Fatalf("no keeper goroutine while a lock is kept (goleak: %v)", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// goleak retries for about a second: well under the 20 s to the
	// lock's next extension.
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
	if err := lk.Extend(t.Context()); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Extend after Close: %v, want ErrClosed", err)
	}
}
