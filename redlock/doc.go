// Package redlock is a distributed lock over N independent Redis masters
// (the Redlock algorithm), with its safety arithmetic in the open.
//
// A Locker asks every master at once to SET the lock key with a random
// token, NX, PX TTL. It holds the lock when a majority (N/2+1) said yes and
// there is validity left:
//
//	validity = TTL − elapsed − drift − SafetyMargin,   drift = TTL·DriftFactor + DriftConstant
//
// where elapsed runs on the monotonic clock from before the first request to
// the moment the majority was known. The lock is the caller's until
// Lock.Deadline() = start + TTL − drift − SafetyMargin, and no longer. A round
// that fails, or whose majority arrives too late, releases every master
// before returning, so a failed attempt leaves nothing behind.
//
// # What is guaranteed, and what it rests on
//
// While a holder is before its Deadline, no other Locker holds the same
// resource. That rests on assumptions no library can check:
//
//   - The masters are independent: no replication between them, and a
//     master that restarts either keeps its data (appendfsync always) or
//     stays down for at least TTL before rejoining. A master restarted
//     empty at once can grant the same lock to a second client.
//   - Clocks: every master's clock runs at a rate within DriftFactor of
//     this process's monotonic clock, and never jumps. A forward jump on a
//     master expires its keys early.
//   - The holder acts before Deadline: a process paused (GC, swap, SIGSTOP)
//     past its deadline still believes it holds the lock. Check Deadline
//     before acting, keep a SafetyMargin, and for correctness-critical
//     writes use fencing tokens, which the resource itself checks.
//
// # Stalled masters
//
// Each call to a master is bounded by NodeTimeout, enforced by the Locker
// itself: go-redis v9 ignores context deadlines for socket I/O unless
// ContextTimeoutEnabled is set, so a SIGSTOPped master would otherwise hold
// every round for the client's ReadTimeout (3 s by default). A master that
// overran its deadline gets no new calls until it answers again (one probe
// at a time), so a stalled master costs neither latency nor a pile-up of
// goroutines and pooled connections. Calls that overran stay owned by the
// Locker; Close waits for them.
//
// # Fencing tokens
//
// A lock alone cannot stop a holder that was paused past its deadline from
// writing late. With Options.Fencing, every acquisition also yields
// Lock.Fence(), and a resource that remembers the largest fence it has
// accepted can reject such a write (WriteFenced does this for a resource in
// Redis; the SQL form is in its doc). Across independent masters a single
// INCR is not enough (different majorities see different counters, and
// "max of what I saw" can repeat), so the fence is made in two rounds
// (DESIGN.md §5): the acquire script returns each master's counter along
// with the lock, the fence is the majority's maximum + 1, and a second
// round writes it back to a majority that still holds our token, before the
// deadline, or the acquisition fails and releases everything. Any two
// completed acquisitions' write-back majorities share a master, and lock
// holdings on one master never overlap, so a later holder always reads a
// counter at least as large as the earlier fence and writes a larger one.
// Clocks play no part in this argument.
//
// Fences are strictly increasing only while no master loses its counter.
// Counter keys never expire, but a master restarted without its data (no
// AOF, or appendfsync other than always) forgets them; if enough masters
// are wiped that a later majority saw only wiped or stale counters, a fence
// can repeat or go back. Run the masters with appendonly yes and
// appendfsync always (compose.fsync.yaml does), or never restart one empty.
// Fencing costs one more round trip per acquisition.
//
// # Keeping a lock
//
// Locker.Do runs a function under the lock and keeps the lock alive while
// it runs: an extension when about a third of the TTL remains, retried
// while time remains. If the deadline comes without one, the function's
// context is cancelled at that instant with cause ErrLost. The function
// must stop touching the resource then; Do returns an error wrapping
// ErrLost. Every goroutine Do starts is joined before it returns.
//
// # Releases that could not be delivered
//
// A master that is not answering when a lock is released (or when a failed
// acquisition cleans up) keeps the key; the Locker remembers the release
// and delivers it when that master answers again (a compare-and-delete, so
// it never removes a later owner's key). A SET that lands on a master after
// its round gave up on it is deleted when its reply arrives. Close drops
// what is still pending: those keys expire with their TTL.
//
// # Errors
//
// ErrNotAcquired and ErrLost are sentinels for errors.Is; *Error carries the
// outcome on each master for errors.As. A context that ended stays visible:
// errors.Is(err, context.Canceled). Bad options and resource names wrap
// ErrInvalid and name the rule they break.
package redlock
