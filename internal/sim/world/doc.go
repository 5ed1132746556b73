// Package world is the deterministic world of the simulator: simulated
// masters (package sim), the network between them and the clients, each
// process's clock, faults, and the checkers that judge the history a run
// leaves. The clients are state machines (Client) that the world drives
// with events and that answer with actions; the library's own sans-I/O
// client plugs in there.
//
// # One source of nondeterminism
//
// A World runs on the caller's goroutine, one event at a time, in order
// of a global simulated clock and, at the same instant, of scheduling: a
// binary heap of events keyed by (time, sequence number). It starts no
// goroutine, reads no clock and iterates no map where order matters.
// Every choice (delays, losses, duplicates, clock rates and offsets,
// faults drawn by Chaos, and the clients' own tokens and jitter, drawn
// from World.Rand) comes from one PCG generator seeded with
// Options.Seed. Hash is an FNV-64a hash of every event handled (what each
// master executed and answered, what each client was told, the notes it
// made, the faults, with the global time): the same seed gives the same
// hash, and a failing seed replays exactly, with Options.Trace on to see
// its events (TraceAround).
//
// # What it models
//
//   - Connections. Each client has, to each master, a command connection
//     and a pub/sub connection. On the command connection commands and
//     replies each take a delay drawn from Options.Delay (a minimum plus
//     an exponential tail, capped) and arrive in the order sent, as TCP
//     delivers: a reply is matched to its command by the Tag the client
//     gave it. A pipeline is several Sends in a row: they never overtake
//     each other, but other clients' commands may run between them, as on
//     a real server. On the pub/sub connection, subscriptions take
//     Options.Delay to reach the master; published messages and the
//     confirmations of subscriptions (Subscribed) take
//     Options.PubSubDelay, in order; each message is lost with chance
//     PubSubLoss or else comes twice with chance PubSubDup (the copy later
//     in the same stream); a confirmation is never lost.
//   - Faults (Inject, or Chaos for a random schedule): a connection that
//     stalls (nothing delivered either way, then everything in order), or
//     is cut (what was in flight either way is lost, the client told
//     Lost for each command, in order; some of them may have run; sends
//     fail until it ends); a pub/sub connection cut (subscriptions and
//     messages lost; Resubscribe once it is back); a master that stalls
//     (commands queue at it and run in the order they came when it
//     resumes; its keys still expire on its running clock) or restarts,
//     with its keyspace or empty, after a time down (sim.Master.Restart:
//     connections break, the script cache and subscriptions are gone); a
//     client that pauses (nothing delivered to it, timers included, until
//     it resumes).
//   - Clocks. Every process has a clock of its own: Options.Epoch plus
//     an offset drawn from ±Options.Offset, and a rate from
//     1 ± Options.Drift, to the part per million, in integer arithmetic
//     (the same on every platform). A master's commands run at its own
//     clock's reading, so its keys expire on its clock; a client is given
//     its own clock's reading, and its timers run on it. Two clocks drawn
//     so differ in rate by up to about 2 × Drift, and in reading by up
//     to 2 × Offset.
//   - The history (History): from the notes clients make (Note), each
//     Lock call (Call) and each critical section (Interval) on the
//     global clock, a holder's deadline put on the global clock through
//     its own clock (the first global instant its clock reads the
//     deadline); and each outage of a master for a client (Outage), from
//     the faults.
//
// The assumptions of the library's safety (docs/design.md §3) hold in a
// run unless it breaks them, and a world told them (Options.Assume)
// refuses to break them by mistake: a Drift that lets two clocks differ
// by more than the clients' DriftFactor, a master restarted empty and
// back within TTL × (1 + DriftFactor), a client paused longer than the
// SafetyMargin each need their Options.Outside flag. A run that breaks
// one must show the violation (Exclusion, DoneByDeadline); the same run
// without it must show none.
//
// # Checkers
//
// Exclusion (a mutex, a semaphore of k permits, readers or one writer,
// from the Mode of each interval; a holder counts until the first of its
// Exit, Deadline and Done), Fences (a holder that entered after another
// stopped counting has a greater fence, and so does an exclusive holder
// that entered after another exclusive one), DoneByDeadline (a holder still
// in its section at its deadline had its Done closed by then), Liveness
// (a call whose client had a majority of masters without an outage from
// a window before it until it returned, or a bound after it if sooner,
// acquired within the bound; one or more Premises, each with its window
// and bound), Holding (how many masters keep a key at a value until a
// given instant: a client checks its lock's keys outlive its deadline)
// and Leftovers (no key left on any master once the clients stopped and
// the world drained). Each returns Violations; Report prints them with
// the seed and a trace.
//
// # What it does not model
//
// Message corruption, reordering within a connection (TCP does not),
// partitions between masters (they do not talk), a client's connection
// pool (one command connection per master, pipelined), Redis's own
// delays (a command runs in no time when it arrives), clocks that jump or
// change rate during a run, partial writes to an AOF (a restart keeps all
// or nothing), and a subscription that arrives while its master is
// stalled (it takes effect at once). Timers cannot be cancelled: a client
// ignores the ones it no longer waits for.
package world
