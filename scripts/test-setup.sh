#!/usr/bin/env bash
# Prepares a machine for `make test` and prints the environment the tests
# should run with (eval'd by the Makefile). Tests need real Redis masters:
#   - local redis-server processes (Debian's package) — installed here with
#     apt-get when we are root, and
#   - for the Docker-backed tests, an image: the official one if present,
#     else redlock-lab/redis:local built from the host's redis-server
#     (no registry is reachable on some machines).
# The process tests need redis-server itself: the Docker backend is module
# labdocker, which the library's tests do not import (an importer of redlock
# would then load testcontainers-go), so they cannot fall back to Docker.
set -euo pipefail
log() { echo "test-setup: $*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "redis-server missing: installing Debian's package"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } >&2 \
      || log "apt-get install redis-server failed"
  fi
fi

# etcd (Debian's etcd-server) for the bench's comparison with etcd
# (cmd/redlock-bench, build tag etcd): its test starts a 3-member cluster
# of its own on loopback when etcd is on PATH, and skips, saying so, when
# it is not. Nothing else needs it, so a failed install fails nothing.
if ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "etcd missing: installing Debian's etcd-server (the bench's etcd test skips without it)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server; } >&2 \
      || log "apt-get install etcd-server failed: the bench's etcd test will skip"
  fi
fi

# PostgreSQL (Debian's postgresql) for SQL fencing (module sqlfence): its
# tests initdb and start a server of their own in a temporary folder, as
# the postgres user when run as root (package sqlfence/pgtest), and skip,
# saying so, without the binaries. The package's own cluster is not used.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "postgresql missing: installing Debian's package (the sqlfence tests skip without it)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2 \
      || log "apt-get install postgresql failed: the sqlfence tests will skip"
  fi
fi

docker_ok=
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then docker_ok=1; fi

image="${REDLOCK_REDIS_IMAGE:-}"
if [ -n "$docker_ok" ]; then
  if [ -z "$image" ]; then
    if docker image inspect redis:7.4-alpine >/dev/null 2>&1; then
      image=redis:7.4-alpine
    elif command -v redis-server >/dev/null 2>&1; then
      docker image inspect redlock-lab/redis:local >/dev/null 2>&1 || {
        log "building redlock-lab/redis:local from the host's redis-server (no registry needed)"
        docker/redis-local/build.sh redlock-lab/redis:local >&2
      }
      image=redlock-lab/redis:local
    fi
  fi
  [ -n "$image" ] && echo "export REDLOCK_REDIS_IMAGE=$image"
fi

if ! command -v redis-server >/dev/null 2>&1; then
  echo "echo 'make test needs redis-server (apt-get install redis-server); the Docker-backed tests also need Docker' >&2; exit 1"
fi
