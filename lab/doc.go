// Package lab starts and controls N real, independent Redis masters for
// tests, the benchmark CLI and users' own tests, and injects the faults a
// quorum lock must survive.
//
// The masters are real redis-server processes (Debian's package works; set
// Options.RedisServer for another binary), one per free 127.0.0.1 port, each
// with its own temporary directory, no persistence unless
// Options.AppendFsyncAlways, and no replication between them. Start returns
// once every master answers; Close kills them all (paused ones included),
// closes every client the Cluster handed out, stops the proxies and removes
// the directories, leaving no process and no goroutine behind. ForTest does
// both around a test. On Linux a master also dies with the test binary
// (PR_SET_PDEATHSIG), so a crashed test leaves none behind either.
//
// Faults, by master index 0..N-1 (an index out of range is an error):
//
//   - Pause / Resume: SIGSTOP / SIGCONT of the process. A paused master keeps
//     its socket, accepts connections from its backlog and answers nothing,
//     like a GC pause or a stalled VM; queued commands run on Resume.
//   - Kill: SIGKILL; the master's data is gone. Restart starts it again on
//     the same port with EMPTY data (what a restart without fsync'd
//     persistence does); clients reconnect on their own.
//   - Slow: CLIENT PAUSE <ms> ALL; the process runs but answers no client for
//     the duration, then catches up by itself.
//   - Cut / Heal (needs Options.Proxy): the in-process TCP proxy in front of
//     the master drops open connections and blackholes new ones, a network
//     partition between clients and that master, until Heal.
//   - Latency (needs Options.Proxy): the proxy delays every chunk by d each
//     way.
//   - JumpClock is a SIMULATION of a forward clock jump: one Lua script
//     shrinks every key's remaining TTL by d and deletes keys whose TTL was
//     at most d. The master's clock itself does not move (libfaketime
//     preloaded into Debian's redis-server crashes it at start-up), so only
//     the jump's effect on expiry is reproduced: TIME and anything computed
//     from it on the server are unaffected.
//
// Clients: Client(i) is one default-option go-redis client per master;
// Clients returns a fresh set, each with its own pool, on every call. Note
// that go-redis clients with default options ignore context deadlines for
// socket I/O, so a call to a paused master blocks for ReadTimeout (3 s)
// whatever its ctx says; set redis.Options.ContextTimeoutEnabled on clients
// that must give up earlier.
//
// This version runs masters as local processes and so needs a unix system;
// a Docker backend is planned behind the same API.
package lab
