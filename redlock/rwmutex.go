package redlock

import "context"

// RWMutex is a read-write lock over the Locker's masters: any number of
// readers, or one writer, never both, while a majority of masters is up
// and within the assumptions of docs/design.md §3 (the proof is §19). Its
// methods return a *Lock: Deadline, Extend, Unlock, Keep and Acquisition
// work as on a mutex's lock. A write lock's Fence, with Options.Fencing,
// is larger than every earlier write lock's; a read lock's Fence is 0
// (readers do not write).
//
// Writers are preferred: a writer waiting in Lock records its intent on
// the masters, which stops new readers, so a stream of readers cannot
// starve it; the readers already in drain, their entries expiring by each
// master's clock at the latest. The intent expires with the Locker's TTL:
// a writer that gives up keeps new readers out for at most that long. A
// reader that keeps extending its lock holds a waiting writer off for as
// long, as an RLock held in sync.RWMutex does.
type RWMutex struct {
	l    *Locker
	name string
	stem string // the keys are stem + ":w" (writer), ":wi" (intent), ":r" (readers)
}

// RWMutex returns the read-write lock called name. The name follows the
// rules of a resource name; it does not share keys with a mutex, a
// semaphore or a TryLockAll set of the same name. A Locker with
// Options.RedsyncKeys refuses it (ErrInvalid: under that naming a mutex
// named "x:w" would have the key of x's writer). It sends nothing.
func (l *Locker) RWMutex(name string) (*RWMutex, error) {
	stem, err := l.primitiveKey(name)
	if err != nil {
		return nil, err
	}
	return &RWMutex{l: l, name: name, stem: stem}, nil
}

// primitiveKey checks name as a resource name and returns its lock key,
// the stem of a semaphore's or read-write lock's keys. A Locker with
// RedsyncKeys is refused: redsync has neither primitive, so there is no
// layout of its to keep, and under its naming (the name is the key) the
// keys hung off a stem could be a mutex's (a mutex named "x:w" would be
// the read-write lock x's writer key) and, on a Redis Cluster master,
// would not share the hash slot their scripts need.
func (l *Locker) primitiveKey(name string) (string, error) {
	if l.opts.RedsyncKeys {
		return "", invalid("a semaphore or read-write lock has no redsync key layout: with RedsyncKeys its keys could be a mutex's (a mutex named \"x:w\" is the key of x's writer); open a Locker without RedsyncKeys for them")
	}
	if err := l.opts.checkName(name); err != nil {
		return "", err
	}
	return l.opts.keyFor(name), nil
}

func (rw *RWMutex) target(m mode) target {
	suffix := ":w"
	if m == modeRead {
		suffix = ":r"
	}
	return target{resource: rw.name, key: rw.stem + suffix, mode: m}
}

// TryRLock makes one round for a read lock: granted where no writer holds
// or waits, on a majority of masters. Options as for TryLock.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("TryRLock")
	}
	return rw.l.tryLock(ctx, "TryRLock", rw.target(modeRead), opts)
}

// RLock waits for a read lock as Locker.Lock waits for a mutex: while a
// writer holds or waits it is woken by every release of the write lock
// (all waiting readers are: they share), and polls on its backoff.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("RLock")
	}
	return rw.l.lock(ctx, "RLock", rw.target(modeRead), opts)
}

// TryLock makes one round for the write lock: granted where no other
// writer holds it and no reader is registered, on a majority of masters.
// It leaves no intent behind: readers are not held off by a TryLock.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("TryLock")
	}
	return rw.l.tryLock(ctx, "TryLock", rw.target(modeWrite), opts)
}

// Lock waits for the write lock as Locker.Lock waits for a mutex. Each of
// its rounds records the writer's intent, so new readers are refused
// while it waits for the ones registered to unlock or expire; it is woken
// by another writer's release, and polls on its backoff for readers.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, nilContext("Lock")
	}
	return rw.l.lock(ctx, "Lock", rw.target(modeWriteWait), opts)
}
