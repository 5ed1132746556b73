package main

import "fmt"

// The bench's optional parts are compiled in only with their build tag, so
// that the default run (go run ./cmd/redlock-bench, the README's first
// command) neither downloads nor compiles what they import (docs/bench.md,
// "The first run"):
//
//	charts  -chart: gonum.org/v1/plot and its fonts
//	docker  -docker and the partition scenario: labdocker, testcontainers-go
//	otel    the telemetry scenario and -metrics-addr: the OpenTelemetry SDK
//	        and its Prometheus exporter
//	peers   the -impls on other clients and the other locks (peerNames):
//	        rueidis, valkey-go, redigo, rueidislock, bsm/redislock
//	etcd    -impls etcd: etcd's concurrency.Mutex and Election on a
//	        3-member etcd cluster the bench starts (etcd on PATH: Debian's
//	        etcd-server): go.etcd.io/etcd/client/v3, gRPC
//	sqlfence -scenarios sqlfence: a SQL write guarded four ways on a
//	        PostgreSQL (module sqlfence, pgx; a throwaway server from
//	        Debian's postgresql, or $REDLOCK_BENCH_PG)
//
// Each has a file with the tag (chart.go, docker.go, telemetry.go,
// peers.go, etcd.go, sqlfence.go) and one without it (*_off.go) that sets
// <tag>Built to false; parseFlags then refuses the flag with extraHint.
// -tags charts,docker,otel,peers,etcd,sqlfence builds them all, as make
// test does.

// extraHint says how to get the optional part tag.
func extraHint(tag string) string {
	return fmt.Sprintf("not in this build; build the bench with -tags %s (go run -tags %s ./cmd/redlock-bench ...)", tag, tag)
}
