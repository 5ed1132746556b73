package redlock

import (
	"context"
	"errors"
	"sync"
)

// liveLocks is the set of locks a Locker handed out and that were not
// unlocked, for Shutdown to release. Once closed it takes no more: an
// acquisition that completes after that releases what it took.
type liveLocks struct {
	mu     sync.Mutex
	locks  map[*Lock]struct{}
	closed bool
	prune  int // prune lapsed locks when the set reaches this size
}

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
		s.locks = map[*Lock]struct{}{}
	}
	s.locks[lk] = struct{}{}
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

func (s *liveLocks) listLocked() []*Lock {
	out := make([]*Lock, 0, len(s.locks))
	for lk := range s.locks {
		out = append(out, lk)
	}
	return out
}

// Shutdown releases every lock this Locker handed out and that is not yet
// unlocked, then closes the Locker (Close). In order:
//
//  1. New acquisitions fail with ErrClosed from now on (TryLock, Lock,
//     Hold, Do, Adopt, and those of a Semaphore or RWMutex); one already
//     in its round releases what it took and fails with ErrClosed too.
//     A lock it releases ends every context derived from it: Keep of it
//     later returns a Held that is over, and a Hold or Do that acquired
//     it fails with ErrClosed without running fn.
//  2. The contexts of kept locks (Hold, Keep, Do) are cancelled, every one
//     of them, before any release is sent: the work they protect stops
//     first. Their Err is context.Canceled (ErrLost for one already
//     lost); a Do's fn sees its context done, and Do returns fn's error
//     (joined with an error wrapping ErrUnlocked or ErrClosed when
//     Shutdown's release came before Do's own).
//  3. Every such lock is released as Unlock releases it, all at once:
//     each release waits at most MasterTimeout per master.
//  4. Close.
//
// ctx carries values (traces) to the releases. If it ends before they are
// all confirmed, Shutdown goes on to Close, which waits for them (each
// bounded by MasterTimeout), and returns ctx's error. Otherwise it returns
// the releases' errors (those wrapping ErrLost: the lock had lapsed, or
// another owner held it), joined. Calling it again, or after Close, only
// closes.
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
	helds := make([]*keeping, len(locks))
	for i, lk := range locks {
		lk.mu.Lock()
		helds[i] = lk.held
		lk.mu.Unlock()
		if helds[i] != nil {
			helds[i].endForUnlock()
		}
	}
	errs := make([]error, len(locks))
	var wg sync.WaitGroup
	for i, lk := range locks {
		wg.Go(func() {
			var err error
			if helds[i] != nil {
				_, err = helds[i].unlock(context.WithoutCancel(ctx))
			} else {
				err = lk.Unlock(context.WithoutCancel(ctx))
			}
			if !errors.Is(err, ErrUnlocked) { // the owner unlocked it meanwhile
				errs[i] = err
			}
		})
	}
	released := make(chan struct{})
	go func() { wg.Wait(); close(released) }()
	var err error
	select {
	case <-released:
		err = errors.Join(errs...)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	l.Close() // waits for the releases in progress (registered operations)
	<-released
	if len(locks) > 0 {
		l.log.Info("redlock: shutdown released the locks still held", "locks", len(locks), "took", l.env.now().Sub(begun))
	}
	return err
}
