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
// # Stalled masters, and how commands reach the masters
//
// Each master has one ordered stream: the commands of all concurrent
// callers are written to it in order, batched into pipelined writes, on
// one connection. A release therefore never overtakes the SET it cleans
// up. Every round is bounded by NodeTimeout, enforced by the Locker with
// one timer per round, whatever the client does. A master that has left a
// command unanswered, and sent no reply, for longer than NodeTimeout is
// skipped: acquire and extend commands fail at once for it (Unavailable),
// and nothing is written to it until it replies to what it already has.
//
// Plain *redis.Client masters get a dedicated connection per master,
// opened with the client's address, dialer, TLS config, user, password
// and DB; the client's pool, hooks and timeouts are not used (its
// ReadTimeout only bounds how long a silent connection is kept before it
// is opened again). Other clients (cluster, Sentinel, ring, credentials
// providers, OnConnect hooks), or any client with Options.ViaClient, send
// each batch as a go-redis pipeline through the client itself, one batch
// at a time; a stalled master then holds its stream for the client's
// ReadTimeout. A Locker's traffic does not wait behind other traffic on
// the fast path; on the plain path it shares the client's pool, and
// slow commands of the application's on that client delay lock rounds
// (head-of-line blocking): give the Locker clients of its own.
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
// it runs: an extension when about a third of the validity window remains,
// retried while time remains. The function's context is done no later
// than the lock's Deadline() (a timer of its own cancels it a millisecond
// before, with cause ErrLost, whatever an extension call is doing), unless
// an extension succeeded first. The function must stop touching the
// resource then; Do returns an error wrapping ErrLost. If the function
// panics, Do releases the lock and lets the panic continue. Every
// goroutine Do starts is joined before it returns.
//
// # Releases that could not be delivered
//
// A master that is skipped when a lock is released (or when a failed
// acquisition cleans up) keeps the key for now; the release waits in its
// stream, behind everything written before it, and goes out when the
// master answers again (a compare-and-delete, so it never removes a later
// owner's key). It is never forgotten by time, only by room: at most 4096
// wait per master, and Locker.Stats counts what was dropped.
//
// # Close
//
// Close makes new operations fail with ErrClosed and waits for those in
// progress; an acquisition caught between its two fenced rounds fails and
// releases what it took. Locks handed out before stay on the masters
// until their TTL: Extend and Unlock after Close return errors wrapping
// ErrClosed, not ErrLost, since the lock may still be held. Releases still
// waiting for a stalled master are dropped; those keys expire with their
// TTL.
//
// # Errors
//
// ErrNotAcquired, ErrLost and ErrClosed are sentinels for errors.Is;
// *Error carries the outcome on each master for errors.As. A context that
// ended stays visible: errors.Is(err, context.Canceled). Bad options and
// resource names wrap ErrInvalid and name the rule they break; so does a
// master that turns out, on first contact, to be the same server as
// another (the same run_id).
package redlock
