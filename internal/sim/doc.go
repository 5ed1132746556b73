// Package sim provides simulated Redis masters for a deterministic
// simulation of the library: a Master executes, synchronously, every
// command and script the library sends, with the replies Redis 7.0 gives,
// at a time the caller passes in. It does no I/O, starts no goroutines and
// reads no clock, so a simulator can run many masters from one seed and
// replay any schedule exactly.
//
// # What it models
//
//   - Keys with expiry on the master's own clock, in whole milliseconds: a
//     key set with PX d at t expires once the clock is past t + d (at
//     exactly t + d it is still there, with a PTTL of 0), as in Redis's
//     keyIsExpired. Expired keys go when next touched; Keys and Dump leave
//     them out.
//   - Strings, hashes (the fence counters and fenced resources) and sorted
//     sets (the queues of waiters, the live readers), ordered by score and
//     then bytewise by member, as Redis orders them.
//   - The commands the library and its scripts send: SET (NX, XX, GET,
//     KEEPTTL, EX, PX, EXAT, PXAT), GET, DEL, EXISTS, TYPE, PTTL, PEXPIRE,
//     INCR, HGET, HMGET, HSET, ZADD (NX, XX, GT, LT, CH), ZREM, ZRANK,
//     ZSCORE, ZCARD, ZCOUNT, ZREMRANGEBYSCORE, ZPOPMIN, ZRANGE by index
//     (WITHSCORES), PUBLISH, PUBSUB NUMSUB, SCRIPT LOAD, EXISTS and FLUSH,
//     EVALSHA, EVAL, PING, TIME, INFO (a run_id per name and restart),
//     DBSIZE, FLUSHALL; with Redis's argument checks and error texts.
//   - Every script in the library's redlock/scripts, each as a Go model that
//     follows its script statement by statement (Scripts, NewScripts,
//     ReadScripts), bound by its file name to the SHA1 of the source the
//     library loads, so that EVALSHA with the library's SHA runs it. The
//     model does not read the source: what keeps a model and its script in
//     step is the differential test, which runs the script on a real
//     server beside the model. An error a
//     script raises is returned without the server's " script: <sha>, on
//     @user_script:<line>." suffix; a Lua runtime error (arithmetic on
//     nil, say) as "ERR user_script: <message>".
//   - The script cache: EVALSHA of a script not loaded answers NOSCRIPT;
//     Restart empties the cache, with or without the keyspace.
//   - Pub/sub: connections (Conn) subscribe and unsubscribe; PUBLISH and
//     PUBSUB NUMSUB count them, and each published message goes to an
//     outbox, with the connections subscribed at that moment, for the
//     simulator to deliver (Drain) with whatever delay, loss or
//     duplication it chooses.
//
// The differential test in this package holds the commands and every
// model against a real redis-server: generated sequences over a small
// keyspace, with collisions of key types, malformed arguments, missing
// ones and expiries, must get the same replies, leave the same keyspace
// and publish the same messages; the millisecond of an expiry is checked
// inside a script, where the server's clock stands still. Its domain is
// what it generates: arguments such as hexadecimal or exponent numbers in
// TTLs, more than three slots, or fences past twenty digits are modelled
// from Redis's and Lua's rules but not compared.
//
// # The world around the masters
//
// Package world (internal/sim/world) runs these masters with clients,
// from one seed, on a global simulated clock: FIFO connections with drawn
// delays that stall and are cut, pub/sub connections whose messages are
// lost, delayed or duplicated, masters that stall and restart with or
// without their data, a clock per process with its own offset and rate,
// and clients paused. Clients are state machines that take events and
// return actions, so the library's protocol code can run there; the
// world's checkers judge the history a run leaves (mutual exclusion,
// fences, Done by the deadline, liveness, nothing left behind). It does
// not model Redis's own execution time, partitions between masters,
// clocks that jump, or partial persistence; its package doc says exactly
// what it does and does not.
//
// # What it does not model
//
// Connections, pipelines, latency, stalls and partitions: they are the
// world's. Persistence (Restart keeps or drops the keyspace
// whole), replication, Redis Cluster, ACLs, memory limits and eviction,
// RESP3, pattern subscriptions, and commands the library does not send.
// The scripts are not interpreted: a script without a model (or one whose
// source no longer matches any model's SHA) fails its EVALSHA with an ERR
// reply, so it cannot pass unnoticed.
package sim
