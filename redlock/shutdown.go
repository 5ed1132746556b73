package redlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"
)

// Shutdown, and the set of live locks it releases (liveLocks, declared
// in lockerstate.go).

// minPrune is the size below which the set is never pruned: a scan of
// this many entries costs little next to the acquisitions that filled it.
const minPrune = 1024

// add registers lk, or reports false once the set is closed.
func (s *liveLocks) add(lk *Lock) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.locks == nil {
		s.locks = map[*Lock]uint64{}
	}
	s.seq++
	s.locks[lk] = s.seq
	var scan []*Lock
	if len(s.locks) >= max(s.prune, minPrune) {
		scan = s.listLocked()
		s.prune = 2 * len(s.locks) // amortised: a scan per doubling
	}
	s.mu.Unlock()
	// A lock past its deadline that nobody unlocked would otherwise stay
	// here for ever. Its deadline is read without s.mu held: Unlock takes
	// the Lock's mutex, then s.mu.
	var lapsed []*Lock
	for _, x := range scan {
		if !x.Valid() {
			lapsed = append(lapsed, x)
		}
	}
	if len(lapsed) > 0 {
		s.mu.Lock()
		for _, x := range lapsed {
			delete(s.locks, x)
		}
		s.prune = max(2*len(s.locks), minPrune)
		s.mu.Unlock()
	}
	return true
}

// remove forgets lk (it was unlocked).
func (s *liveLocks) remove(lk *Lock) {
	s.mu.Lock()
	delete(s.locks, lk)
	s.mu.Unlock()
}

func (s *liveLocks) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// close stops registrations and returns the locks registered.
func (s *liveLocks) close() []*Lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.listLocked()
}

// listLocked lists the locks in the order they were added: Shutdown
// releases them in a fixed order, which the simulator's replays need
// (docs/design.md §20).
func (s *liveLocks) listLocked() []*Lock {
	out := make([]*Lock, 0, len(s.locks))
	for lk := range s.locks {
		out = append(out, lk)
	}
	slices.SortFunc(out, func(a, b *Lock) int { return cmp.Compare(s.locks[a], s.locks[b]) })
	return out
}

// Shutdown releases every lock this Locker handed out and not yet unlocked,
// then closes it: new acquisitions fail with ErrClosed from the start (one in
// its round gives back what it took); the contexts of kept locks are
// cancelled before any release is sent (Err: context.Canceled), so the work
// they protect stops first; every lock is released as Unlock releases it, at
// once; then Close. Keep of a lock it released fails with ErrClosed.
//
// If ctx ends first, Shutdown goes on to Close, which waits for the releases
// (each bounded by MasterTimeout), and returns ctx's error; otherwise the
// releases' errors, joined. Calling it again, or after Close, only closes.
func (l *Locker) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return nilContext("Shutdown")
	}
	if l.isClosing() {
		// After Close nothing can be released (Unlock wraps ErrClosed):
		// only close, as documented.
		l.live.close()
		return l.Close()
	}
	locks := l.live.close()
	begun := l.env.now()
	helds := make([]*lifetime, len(locks))
	for i, lk := range locks {
		lk.mu.Lock()
		helds[i] = lk.held
		if helds[i] != nil {
			helds[i].lapseLocked() // a loss whose timer runs late, as Unlock
		}
		lk.mu.Unlock()
		if helds[i] != nil {
			helds[i].endForUnlock()
		}
	}
	// The releases run at once, each on a goroutine of the Locker's own
	// (env.spawn: the simulator's coroutines), and the waits below go
	// through the env too (docs/design.md §20).
	errs := make([]error, len(locks))
	var left atomic.Int64
	left.Store(int64(len(locks)))
	released := make(chan struct{}, 1)
	for i, lk := range locks {
		l.env.spawn(func() {
			var err error
			if helds[i] != nil {
				_, err = helds[i].unlock(context.WithoutCancel(ctx))
			} else {
				err = lk.Unlock(context.WithoutCancel(ctx))
			}
			if !errors.Is(err, ErrUnlocked) { // the owner unlocked it meanwhile
				errs[i] = err
			}
			if left.Add(-1) == 0 {
				released <- struct{}{}
			}
		})
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	done := len(locks) == 0
	var err error
	for !done {
		if l.env.sleep(ctx, context.Background(), time.Hour, released, &t) == wakeWoken {
			done = true
		} else if ctx.Err() != nil {
			err = context.Cause(ctx)
			break
		}
	}
	l.Close() // waits for the releases in progress (registered operations)
	for !done {
		done = l.env.sleep(context.Background(), context.Background(), time.Hour, released, &t) == wakeWoken
	}
	if err == nil {
		err = errors.Join(errs...)
	}
	if len(locks) > 0 {
		l.log.Info("redlock: shutdown released the locks still held", "locks", len(locks), "took", l.env.now().Sub(begun))
	}
	return err
}
