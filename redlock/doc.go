// Package redlock is a distributed lock over N independent Redis masters
// (the Redlock algorithm), with its safety arithmetic in the open.
//
// A Locker asks every master at once to SET the lock key to a fresh random
// token, NX, PX TTL. It holds the lock when a majority (N/2+1) said yes
// with validity left:
//
//	validity = TTL − elapsed − drift − SafetyMargin,   drift = TTL·DriftFactor + DriftConstant
//
// with elapsed measured on the monotonic clock from before the first
// request to the decision. The lock is the caller's until Lock.Deadline() =
// start + TTL − drift − SafetyMargin, and no longer. An attempt that fails,
// or whose majority comes too late, releases every master that may hold the
// key before it returns.
//
// # Guarantee and assumptions
//
// While a holder is before its Deadline, no other holder of the same
// resource is before its own, provided that:
//
//   - the masters are independent (no replication between them, no server
//     counted twice), and none comes back empty sooner than a TTL after it
//     went down, unless it keeps its data with appendfsync always;
//   - no master's clock jumps, or runs faster than DriftFactor relative to
//     this process's monotonic clock;
//   - the holder is not paused between checking the deadline and acting for
//     longer than SafetyMargin allows.
//
// The library cannot detect a violation of any of these. For writes that
// must never be applied out of order, use fencing tokens (Options.Fencing,
// Lock.Fence, WriteFenced): the resource then rejects a late holder's write.
// Fences are strictly increasing only while no master loses its counter.
//
// # Using it
//
// TryLock makes one round; Lock retries until its context ends, waking as
// soon as the holder releases (the release publishes on the masters) with
// jittered backoff as the fallback. WithTTL gives one lock its own TTL.
// TryLockAll and LockAll lock several resources, all or none, without
// deadlock between callers asking for overlapping sets. Extend renews a
// lock; Unlock releases it and reports ErrLost only on evidence that the
// lock was not ours.
//
// Hold (or Lock.Keep) returns a Held: a lock that extends itself in the
// background until Unlock, with a Done channel and a Context that end,
// with cause ErrLost, no later than the lock's Deadline when it can no
// longer be extended (leader election, long-running consumers). Do runs a
// function under a Held lock and releases it when the function returns.
// Close waits for operations in progress; locks handed out before it stay
// on the masters until their TTL. Shutdown first cancels the kept locks'
// contexts and releases every lock not yet unlocked. Adopt takes a lock
// over by its token (Lock.Token, persisted across a restart), with a
// deadline from the keys' remaining TTLs (docs/design.md §16).
//
// Locker.Semaphore admits at most a fixed number of holders at once (each
// permit a lock key of its own, taken in one round), and Locker.RWMutex
// any number of readers or one writer, writers preferred; both under the
// same assumptions, with any minority of masters down, and both hand out
// a *Lock (docs/design.md §18, §19).
//
// Each master has one ordered, pipelined stream, so a release never
// overtakes the SET it cleans up; a master silent for MasterTimeout is
// skipped until it replies (docs/design.md §10).
//
// # Owner labels
//
// Options.OwnerLabel puts a label such as "host-1:4242" in front of every
// token ("<label>/<random>"), so that an operator reading the masters
// (cmd/redlock inspect, list) can tell which process holds a lock. Anyone
// who can read the masters can read it: put nothing secret in it. KeyFor
// and ResourceFor map resources to keys and back for such tools.
//
// # Errors
//
// ErrNotAcquired, ErrLost, ErrClosed and ErrInvalid are sentinels for
// errors.Is; *Error carries each master's outcome for errors.As. A context
// that ended stays visible: errors.Is(err, context.Canceled).
//
// The arithmetic with worked numbers, the assumptions and what breaks each,
// the exact rules of each operation, the argument for fencing tokens, the
// per-master streams, locks on several resources, wake on release and the
// hand-off of the key to the next waiter are in docs/design.md (§2 to
// §14) in this module's repository.
package redlock
