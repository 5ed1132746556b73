package chaos

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"github.com/redis/go-redis/v9"
)

func TestCheckBoundAndRW(t *testing.T) {
	sec := func(client int, res string, enter, exit int64) Section {
		return Section{Client: client, Resource: res, Enter: enter, Exit: exit}
	}
	bound := []struct {
		name             string
		secs             []Section
		k, most, violate int
	}{
		{"two of two", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20)}, 2, 2, 0},
		{"three of two", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20), sec(3, "a", 9, 30)}, 2, 3, 1},
		{"touching is not an overlap", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20), sec(3, "a", 10, 30)}, 2, 2, 0},
		{"other resources apart", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20), sec(3, "b", 6, 30)}, 2, 2, 0},
		{"one permit is a mutex", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20)}, 1, 2, 1},
	}
	for _, tt := range bound {
		t.Run("bound/"+tt.name, func(t *testing.T) {
			v := CheckBound(tt.secs, tt.k)
			if v.Most != tt.most || v.Violations != tt.violate {
				t.Errorf("most %d, violations %d; want %d, %d (%s)", v.Most, v.Violations, tt.most, tt.violate, v.Example)
			}
		})
	}
	rw := []struct {
		name           string
		reads, writes  []Section
		most, violates int
	}{
		{"readers share", []Section{sec(1, "a", 0, 10), sec(2, "a", 5, 20)}, nil, 2, 0},
		{"writer after readers", []Section{sec(1, "a", 0, 10)}, []Section{sec(2, "a", 10, 20)}, 1, 0},
		{"writer inside a reader", []Section{sec(1, "a", 0, 10)}, []Section{sec(2, "a", 5, 8)}, 1, 1},
		{"reader inside a writer", []Section{sec(1, "a", 5, 8)}, []Section{sec(2, "a", 0, 10)}, 1, 1},
		{"two writers", nil, []Section{sec(1, "a", 0, 10), sec(2, "a", 9, 12)}, 0, 1},
		{"other resources apart", []Section{sec(1, "b", 0, 10)}, []Section{sec(2, "a", 0, 10)}, 1, 0},
	}
	for _, tt := range rw {
		t.Run("rw/"+tt.name, func(t *testing.T) {
			v := CheckRW(tt.reads, tt.writes)
			if v.MostReaders != tt.most || v.Violations != tt.violates {
				t.Errorf("most readers %d, violations %d; want %d, %d (%s)", v.MostReaders, v.Violations, tt.most, tt.violates, v.Example)
			}
		})
	}
}

// naiveAcquire is the per-master-count semaphore with a plain majority
// (docs/design.md §18.1): each master admits a token while it counts
// fewer than k, and the caller holds when a majority admitted it.
func naiveAcquire(t *testing.T, masters []*redis.Client, key, token string, k int) bool {
	t.Helper()
	const admit = `if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[1], 0, ARGV[1]) return 1 end return 0`
	n := 0
	for _, m := range masters {
		v, err := m.Eval(t.Context(), admit, []string{key}, token, k).Int()
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n >= 2 // a majority of 3
}

// The constructed row: 3 masters, k = 2, and three clients that each reach
// two masters (the third is slow for it: one master, a minority, inside a
// Redlock's assumptions). The naive semaphore admits all three, and the
// checker flags more than k holders. The Semaphore, asked in the same
// pattern, admits two and refuses the third; the checker finds nothing.
func TestCheckerCatchesNaiveSemaphore(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	m := []*redis.Client{c.Client(0), c.Client(1), c.Client(2)}
	reach := [][]int{{0, 1}, {0, 2}, {1, 2}}

	var h History
	var open []*Section
	for client, r := range reach {
		if !naiveAcquire(t, []*redis.Client{m[r[0]], m[r[1]]}, "naive", string(rune('A'+client)), 2) {
			t.Fatalf("the naive semaphore refused client %d; the construction expects it admitted", client)
		}
		open = append(open, &Section{Client: client, Resource: "naive", Enter: monoNow()})
	}
	for _, s := range open {
		s.Exit = monoNow()
		h.addSection(*s)
	}
	v := CheckBound(h.Sections(), 2)
	if v.Violations != 1 || v.Most != 3 {
		t.Fatalf("naive semaphore: violations %d, most %d; want the checker to flag 3 holders of 2 permits", v.Violations, v.Most)
	}
	t.Logf("naive semaphore: %s", v.Example)

	// The Semaphore, each client's Locker reaching the same two masters:
	// its third master is an address where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var held []*redlock.Lock
	var got History
	for client, r := range reach {
		clients := make([]redis.UniversalClient, 3)
		for i := range clients {
			clients[i] = redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, Protocol: 2})
		}
		for _, i := range r {
			clients[i] = c.Clients()[i]
		}
		l := newLocker(t, clients, &redlock.Options{TTL: constructedTTL, MasterTimeout: 100 * time.Millisecond})
		t.Cleanup(func() {
			l.Close()
			for i, cl := range clients {
				if i != r[0] && i != r[1] {
					cl.Close()
				}
			}
		})
		s, err := l.Semaphore("exports", 2)
		if err != nil {
			t.Fatal(err)
		}
		// Rounds whose two masters split over the slots are retried.
		var lk *redlock.Lock
		for range 20 {
			if lk, err = s.TryAcquire(t.Context()); err == nil || errors.Is(err, redlock.ErrInvalid) {
				break
			}
		}
		if lk != nil {
			held = append(held, lk)
			got.addSection(Section{Client: client, Resource: "exports", Enter: monoNow()})
		}
	}
	secs := got.Sections()
	for i := range secs {
		secs[i].Exit = monoNow()
	}
	for _, lk := range held {
		_ = lk.Unlock(context.Background())
	}
	if len(held) != 2 {
		t.Fatalf("the Semaphore granted %d permits in the naive semaphore's pattern; want 2 (and the third refused)", len(held))
	}
	if v := CheckBound(secs, 2); v.Violations != 0 || v.Most != 2 {
		t.Fatalf("Semaphore: violations %d, most %d; want 0, 2", v.Violations, v.Most)
	}
}

// A short run of each inside the assumptions, with one of 3 masters
// SIGSTOPped for the middle second: 0 violations, and the bound reached
// (k holders at once; readers sharing). With -chaos.long it runs, cycle
// after cycle (1 s healthy, then 1 s with the next master stopped), until
// each history has 100 000 sections (or -chaos.sections), at most 30 min
// per primitive: not run by make test.
func TestSemaphoreRWInsideAssumptions(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	opts := &redlock.Options{TTL: 5 * time.Second, MasterTimeout: 100 * time.Millisecond}
	var lockers []*redlock.Locker
	for range 2 {
		l := newLocker(t, c.Clients(), opts)
		t.Cleanup(func() { l.Close() })
		lockers = append(lockers, l)
	}
	target, limit := 0, 3*time.Second
	if *long {
		target, limit = cmp.Or(*sections, 100_000), 30*time.Minute
	}
	run := func(h *History, work func(ctx context.Context, g int, l *redlock.Locker)) {
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(ctx, g, lockers[g%2])
			}()
		}
		for cycle := 0; ctx.Err() == nil; cycle++ {
			time.Sleep(time.Second) // healthy, then the stall's place
			if err := c.Pause(cycle % c.N()); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Second)
			c.ResumeAll()
			if h.Len() >= target {
				break
			}
		}
		cancel()
		wg.Wait()
	}
	section := func(h *History, g int, res string, lk *redlock.Lock) {
		s := Section{Client: g, Resource: res, Enter: monoNow()}
		time.Sleep(time.Duration(rand.N(3)) * time.Millisecond)
		s.Exit, s.Late = monoNow(), !lk.Valid()
		h.addSection(s)
		_ = lk.Unlock(context.Background())
	}

	var sem History
	run(&sem, func(ctx context.Context, g int, l *redlock.Locker) {
		s, err := l.Semaphore("exports", 2)
		if err != nil {
			t.Error(err)
			return
		}
		for ctx.Err() == nil {
			if lk, err := s.Acquire(ctx); err == nil {
				section(&sem, g, "exports", lk)
			}
		}
	})
	var reads, writes History
	run(&reads, func(ctx context.Context, g int, l *redlock.Locker) {
		rw, err := l.RWMutex("cache")
		if err != nil {
			t.Error(err)
			return
		}
		for ctx.Err() == nil {
			if rand.N(10) == 0 {
				if lk, err := rw.Lock(ctx); err == nil {
					section(&writes, g, "cache", lk)
				}
			} else if lk, err := rw.RLock(ctx); err == nil {
				section(&reads, g, "cache", lk)
			}
		}
	})
	b := CheckBound(sem.Sections(), 2)
	v := CheckRW(reads.Sections(), writes.Sections())
	t.Logf("semaphore: %+v; read-write: %+v", b, v)
	if b.Violations != 0 || b.Most != 2 || b.Sections < 20 {
		t.Errorf("semaphore: %+v; want 0 violations, 2 at once, some sections", b)
	}
	if v.Violations != 0 || v.MostReaders < 2 || v.Writes == 0 {
		t.Errorf("read-write: %+v; want 0 violations, readers sharing, some writes", v)
	}
	for _, s := range append(append(sem.Sections(), reads.Sections()...), writes.Sections()...) {
		if s.Late {
			t.Errorf("a section of %q exited after its deadline: outside the assumptions", s.Resource)
		}
	}
}
