// Package redlock is a distributed lock over N independent Redis masters
// (the Redlock algorithm), with its safety arithmetic in the open.
//
// A Locker asks every master at once to SET the lock key to a fresh random
// token, NX, PX TTL. It holds the lock when a majority said yes with
// validity left:
//
//	validity = TTL − elapsed − drift − SafetyMargin,   drift = TTL·DriftFactor + DriftConstant
//
// The lock is the caller's until Lock.Deadline() = start + TTL − drift −
// SafetyMargin, and no longer. While a holder is before its Deadline, no
// other holder of the same resource is before its own, under the
// assumptions of docs/design.md §3 (independent masters that do not come
// back empty within a TTL, bounded clock drift, no pause past
// SafetyMargin). Where a late write must never land, use fencing
// (Options.Fencing, Lock.Fence, WriteFenced).
//
// TryLock makes one round; Lock waits, woken by the holder's release or
// expiry. TryLockAll and LockAll take several resources, all or none.
// Extend renews a lock, Unlock releases it; Lock.Keep extends it in the
// background, and Done, Err and Context say when it ends; Do runs a
// function under a kept lock. Locker.Semaphore, Locker.RWMutex and
// Locker.Election build on the same rounds. Adopt takes a lock over by its
// token after a restart; Shutdown releases every lock and closes.
//
// Errors wrap one of ErrNotAcquired (with ErrHeld when another owner holds
// the lock), ErrLost, ErrClosed, ErrUnlocked, ErrInvalid, ErrNoLeader or
// ErrStaleFence, for errors.Is; *Error carries each master's outcome
// (quorum.Outcome) for errors.As.
//
// Masters are go-redis clients (New), URLs (NewFromURLs), or any client
// through package driver (NewMasters; adapters/ has rueidis, valkey-go and
// redigo). docs/design.md in this module's repository is the
// specification: the rules of each operation, the proofs, and what each
// assumption's failure breaks.
package redlock
