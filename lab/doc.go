// Package lab starts and controls N real, independent Redis masters for
// tests, the benchmark CLI and users' own tests, and injects the faults a
// quorum lock must survive.
//
// Two backends run the masters (Options.Backend), behind one API:
//
//   - Process (the default, unix only): one redis-server process per free
//     127.0.0.1 port, each in its own temporary directory.
//   - Docker: one container per master on a network of its own, run by
//     module github.com/quorumlab/redlock/labdocker (testcontainers-go;
//     a module apart so that an importer of redlock never loads it):
//     labdocker.Start, labdocker.ForTest. The image (Options.Image) must
//     already be present locally: the lab never pulls.
//
// Masters have no replication, and no persistence unless
// Options.AppendFsyncAlways. Start returns once every master answers; Close
// removes every process, container, proxy, client and directory the
// Masters created. ForTest does both around a test.
//
// Faults, by master index 0..N-1: Pause/Resume (a hung master),
// Kill/Restart (back with EMPTY data) and RestartPersisted (back from its
// AOF; Process backend), Slow (CLIENT PAUSE), Cut/Heal (a partition),
// Latency (Options.Proxy), and JumpClock, which SIMULATES a forward clock
// jump by shrinking every key's TTL: the master's real clock does not move.
// What each one does on each backend, and what clients see, is in
// docs/design.md §12 in this module's repository.
//
// StartClusters (ClustersForTest) instead starts N independent Redis
// Clusters of S shard masters each (redis-server in cluster mode, no
// replicas, Process backend only), for a quorum whose masters are
// clusters; Clusters.Pause and Resume stop a single shard, and Slot and
// ShardOf say which shard serves a key.
//
// Client(i) is one default-option go-redis client per master; Clients
// returns a fresh set on every call. go-redis clients with default options
// ignore context deadlines for socket I/O, so a call to a paused master
// blocks for ReadTimeout (3 s) whatever its ctx says; set
// redis.Options.ContextTimeoutEnabled on clients that must give up sooner.
//
// Options.TLS and Options.ACLUser (Process backend) start masters that
// accept TLS only, with a test CA made at Start, and an ACL user
// (DefaultACLRules by default) that Client and Clients log in as; Admin,
// TLSConfig, CACertFile and URL hand the set-up on.
package lab
