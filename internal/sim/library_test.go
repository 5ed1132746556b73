package sim_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// capture is a driver.Master that records the scripts a Locker loads
// when it connects, and answers as a server would.
type capture struct {
	loads chan []string
}

var _ driver.Master = (*capture)(nil)

func (c *capture) Do(_ context.Context, cmds [][]string) ([]driver.Reply, error) {
	var srcs []string
	out := make([]driver.Reply, len(cmds))
	m := sim.New("capture", nil)
	for i, cmd := range cmds {
		if len(cmd) == 3 && cmd[0] == "SCRIPT" && cmd[1] == "LOAD" {
			srcs = append(srcs, cmd[2])
		}
		out[i] = toRedlock(m.Do(0, cmd))
	}
	if len(srcs) > 0 {
		select {
		case c.loads <- srcs:
		default:
		}
	}
	return out, nil
}

func (c *capture) Addr() string { return "capture" }

func toRedlock(r sim.Reply) driver.Reply {
	return driver.Reply{Kind: driver.ReplyKind(r.Kind), Int: r.Int, Text: r.Text}
}

// TestScriptsAreTheLibrarys checks that ReadScripts composes the scripts
// as the library does: the SHA1s of what a Locker loads when it connects,
// and of what WriteFenced runs on a real server, are the ones the models
// are bound to, and no script goes without a model.
func TestScriptsAreTheLibrarys(t *testing.T) {
	_, scripts := loadScripts(t)
	byName := map[string]string{}
	for _, n := range scripts.Names() {
		byName[scripts.SHA(n)] = n
	}
	c := &capture{loads: make(chan []string, 1)}
	l, err := redlock.NewMasters([]driver.Master{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A master is dialled on its first command.
	if lk, err := l.TryLock(t.Context(), "x"); err == nil {
		lk.Unlock(t.Context())
	}
	var loaded []string
	select {
	case srcs := <-c.loads:
		for _, src := range srcs {
			m := sim.New("probe", scripts)
			sha := m.Do(0, []string{"SCRIPT", "LOAD", src}).Text
			name, ok := byName[sha]
			if !ok {
				t.Errorf("the library loads a script that has no model (SHA1 %s):\n%.300s", sha, src)
			}
			loaded = append(loaded, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Locker loaded no scripts in 10s")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// WriteFenced runs fenced_write.lua through go-redis on the
	// resource's own server: run it on a real one and ask that server.
	ms := lab.ForTest(t, 1, &lab.Options{Backend: lab.Process})
	rc := ms.Client(0)
	if err := redlock.WriteFenced(t.Context(), rc, "res", 1, "owner", "v"); err != nil {
		t.Fatal(err)
	}
	ex, err := rc.ScriptExists(t.Context(), scripts.SHA("fenced_write.lua")).Result()
	if err != nil || !ex[0] {
		t.Errorf("WriteFenced ran a script other than the model's fenced_write.lua (%v, %v)", ex, err)
	}
	loaded = append(loaded, "fenced_write.lua")
	slices.Sort(loaded)
	if !slices.Equal(loaded, scripts.Names()) {
		t.Errorf("scripts the library runs %q, models bound %q", loaded, scripts.Names())
	}
}

// simMaster serves a Locker from a simulated master, on the client path,
// with the master's clock on real time. It records replies that show a
// gap in the simulation: a command or script it does not model.
type simMaster struct {
	addr  string
	mu    sync.Mutex
	m     *sim.Master
	start time.Time
	gaps  []string
}

var _ driver.Master = (*simMaster)(nil)

func (s *simMaster) Do(_ context.Context, cmds [][]string) ([]driver.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Duration(1e18) + time.Since(s.start)
	out := make([]driver.Reply, len(cmds))
	for i, cmd := range cmds {
		r := s.m.Do(now, cmd)
		if r.Kind == sim.Error && !strings.HasPrefix(r.Text, "NOSCRIPT") {
			s.gaps = append(s.gaps, fmt.Sprintf("%.60q: %s", cmd, r.Text))
		}
		out[i] = toRedlock(r)
	}
	return out, nil
}

func (s *simMaster) Addr() string { return s.addr }

// TestLockerOnSimulatedMasters runs the library's own Locker against
// three simulated masters: every command and script it sends for the
// mutex, fencing, several resources, the semaphore and the read-write
// lock is answered without an error, and once everything is released no
// lock key is left (only what never expires by design: fence counters and
// the semaphore's permits record).
func TestLockerOnSimulatedMasters(t *testing.T) {
	_, scripts := loadScripts(t)
	var sms []*simMaster
	var masters []driver.Master
	for i := range 3 {
		s := &simMaster{addr: fmt.Sprintf("sim-%d", i), m: sim.New(fmt.Sprintf("sim-%d", i), scripts), start: time.Now()}
		sms = append(sms, s)
		masters = append(masters, s)
	}
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fenced), func(t *testing.T) {
			l, err := redlock.NewMasters(masters, &redlock.Options{Fencing: fenced})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := t.Context()
			lk, err := l.TryLock(ctx, "res")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sms {
				s.mu.Lock()
				got := s.m.Do(time.Duration(1e18)+time.Since(s.start), []string{"GET", "redlock:{res}"})
				s.mu.Unlock()
				if got.Text != lk.Token() {
					t.Errorf("%s: res holds %s, want the lock's token", s.addr, got)
				}
			}
			if _, err := l.TryLock(ctx, "res"); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("second TryLock: %v, want ErrNotAcquired", err)
			}
			if fenced && lk.Fence() == 0 {
				t.Error("fenced lock without a fence")
			}
			if err := lk.Extend(ctx); err != nil {
				t.Error(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Error(err)
			}
			all, err := l.TryLockAll(ctx, []string{"x", "y"})
			if err != nil {
				t.Fatal(err)
			}
			if err := all.Extend(ctx); err != nil {
				t.Error(err)
			}
			if err := all.Unlock(ctx); err != nil {
				t.Error(err)
			}
			sem, err := l.Semaphore("sem", 2)
			if err != nil {
				t.Fatal(err)
			}
			p1, err := sem.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := sem.Holders(ctx); err != nil || n != 1 {
				t.Errorf("Holders: %d, %v; want 1", n, err)
			}
			if err := p1.Unlock(ctx); err != nil {
				t.Error(err)
			}
			rw, err := l.RWMutex("rw")
			if err != nil {
				t.Fatal(err)
			}
			r1, err := rw.TryRLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rw.TryLock(ctx); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("TryLock under a reader: %v, want ErrNotAcquired", err)
			}
			if err := r1.Extend(ctx); err != nil {
				t.Error(err)
			}
			if err := r1.Unlock(ctx); err != nil {
				t.Error(err)
			}
			w1, err := rw.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := w1.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for _, s := range sms {
		if len(s.gaps) > 0 {
			t.Errorf("%s answered errors:\n%s", s.addr, strings.Join(s.gaps, "\n"))
		}
		var left []string
		for _, k := range s.m.Keys(time.Duration(1e18) + time.Since(s.start)) {
			if !strings.HasSuffix(k, ":fence") && !strings.HasSuffix(k, ":wg") && !strings.Contains(k, "sem") {
				left = append(left, k)
			}
		}
		if len(left) > 0 {
			t.Errorf("%s: keys left behind: %q (all: %+v)", s.addr, left, s.m.Dump(time.Duration(1e18)+time.Since(s.start)))
		}
	}
}

// The reply kinds are redlock's, value for value, so that a simulated
// master's reply converts to a driver.Reply by a cast (toRedlock).
func TestKindsAreRedlocks(t *testing.T) {
	pairs := []struct {
		sim     sim.Kind
		redlock driver.ReplyKind
	}{
		{sim.Nil, driver.ReplyNil}, {sim.Status, driver.ReplyStatus}, {sim.Error, driver.ReplyError},
		{sim.Int, driver.ReplyInt}, {sim.Bulk, driver.ReplyBulk}, {sim.Array, driver.ReplyOther},
	}
	for _, p := range pairs {
		if uint8(p.sim) != uint8(p.redlock) {
			t.Errorf("sim kind %d is redlock kind %d", p.sim, p.redlock)
		}
	}
}
