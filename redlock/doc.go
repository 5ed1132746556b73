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
// # Errors
//
// ErrNotAcquired and ErrLost are sentinels for errors.Is; *Error carries the
// outcome on each master for errors.As. A context that ended stays visible:
// errors.Is(err, context.Canceled). Bad options and resource names wrap
// ErrInvalid and name the rule they break.
package redlock
