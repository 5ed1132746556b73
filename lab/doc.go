// Package lab starts and controls N real, independent Redis masters for
// tests, the benchmark CLI and users' own tests, and injects the faults a
// quorum lock must survive.
//
// Two backends run the masters (Options.Backend), behind the same API:
//
//   - Process (the default): real redis-server processes (Debian's package
//     works; set Options.RedisServer for another binary), one per free
//     127.0.0.1 port, each with its own temporary directory. On Linux a
//     master also dies with the test binary (PR_SET_PDEATHSIG), so a crashed
//     test leaves none behind. Needs a unix system.
//   - Docker: one container per master, started and controlled through the
//     docker command line (so the lab needs no Docker client library and
//     reaches whatever engine the user's docker commands reach: DOCKER_HOST,
//     Docker contexts, rootless sockets), all on a bridge network created
//     for the cluster, each publishing 6379 on a 127.0.0.1 port chosen at
//     first start and bound explicitly, so that Restart and Heal bring a
//     master back on the same address. The image is Options.Image, by
//     default $REDLOCK_REDIS_IMAGE, else the official redis:7.4-alpine that
//     users with a registry get. The lab never pulls (docker run --pull
//     never, which needs a docker CLI of 20.10 or later): the image must be
//     present locally, and DockerAvailable says whether it is (and whether
//     the CLI is installed and an engine answers it) so tests can skip.
//     Machines without a registry, such as the project's lab machines, build
//     redlock-lab/redis:local FROM scratch out of the host's redis-server
//     (make image) and set REDLOCK_REDIS_IMAGE to it. The lab removes what
//     it creates itself and labels all of it redlock-lab.cluster=<id>, so
//     after a crashed test binary
//     `docker ps -a --filter label=redlock-lab.cluster` finds the leftovers.
//     DEBUG is enabled ("yes", not "local": through a published port the
//     client is the bridge gateway).
//
// Either way each master has no persistence unless
// Options.AppendFsyncAlways, and no replication. Start returns once every
// master answers; Close kills them all (paused ones included), closes every
// client the Cluster handed out, stops the proxies and removes the
// directories, or the containers and the network, leaving no process,
// container or goroutine behind. ForTest does both around a test.
//
// Faults, by master index 0..N-1 (an index out of range is an error):
//
//   - Pause / Resume: SIGSTOP / SIGCONT of the process (docker pause /
//     unpause, the cgroup freezer). A paused master keeps its socket,
//     accepts connections (from its backlog, or Docker's port proxy) and
//     answers nothing, like a GC pause or a stalled VM; queued commands run
//     on Resume.
//   - Kill: SIGKILL (the container is removed); the master's data is gone.
//     Restart starts it again on the same port with EMPTY data, even with
//     AOF on (what a restart without fsync'd persistence does; on Docker a
//     new container, not docker restart); clients reconnect on their own.
//   - Slow: CLIENT PAUSE <ms> ALL; the process runs but answers no client for
//     the duration, then catches up by itself.
//   - Cut / Heal: a network partition between clients and that master,
//     until Heal. Through the in-process TCP proxy (Options.Proxy) open
//     connections are dropped and new ones are blackholed: clients see
//     timeouts. On the Docker backend without the proxy the container is
//     disconnected from its network (docker network disconnect), which takes
//     its published port away too: new connections are REFUSED and open
//     ones get EOF, a fast failure rather than a silent one (go-redis still
//     retries refused dials: measured with v9.23, a default client reports
//     it after about 1.7 s, one with MaxRetries -1 after about 0.4 s, unless
//     its ctx ends first). Use Pause, or the
//     proxy, for timeouts. Data survives a cut; Heal reconnects the
//     container on the same port. While cut, Slow and JumpClock cannot
//     reach a Docker master either. On the process backend Cut needs
//     Options.Proxy.
//   - Latency (needs Options.Proxy, on either backend): the proxy delays
//     every chunk by d each way.
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
// The Process backend needs a unix system; elsewhere use the Docker one.
package lab
