#!/usr/bin/env bash
# check-consumer-deps.sh [REPO_DIR] — what a program that imports only the
# library gets in its go.mod and go.sum.
#
# Builds a throwaway consumer module in a temporary directory: a main.go
# that imports <module>/redlock, a replace directive to REPO_DIR (default:
# the repository holding this script), and `go mod tidy`. Fails, listing the
# offenders, if the consumer's go.mod or go.sum names a module outside the
# allowlists below. `make test` runs it.
#
# Why go.sum matters too: `go mod tidy` records checksums for everything
# `go test all` would load in the consumer, which includes the tests of
# redlock's packages and of go-redis, and whatever those tests import. A
# test-only import that drags in a large module tree (it once did: redlock's
# tests -> lab -> testcontainers-go -> moby/term -> Azure/go-ansiterm, which
# even landed in the consumer's go.mod) shows up there first.
#
# Works online through the module proxy and offline from the module cache
# (GOPROXY=off): the consumer's go.sum is seeded from the repository's, so
# no checksum database lookup is needed for a module the repository already
# vouches for, and tidy drops the lines it does not need. Leaves nothing
# behind: the consumer lives in a mktemp directory removed on exit.
set -euo pipefail

start=$(date +%s.%N)
GO=${GO:-go}
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
log() { echo "check-consumer-deps: $*" >&2; }

# The allowlists are what a module importing only go-redis v9.23.0 gets
# (measured: a throwaway consumer of go-redis alone, go mod tidy), plus the
# library's own module and goleak. A new go-redis that needs more fails this
# check on purpose: look at what it brings, then extend the lists.
#
# Allowed in go.mod (and go.sum): what building a program with redlock
# needs.
mod_allowed=(
  github.com/quorumlab/redlock   # the library (replaced here, so absent)
  github.com/redis/go-redis/v9   # its one dependency
  github.com/cespare/xxhash/v2   # go-redis
  go.uber.org/atomic             # go-redis
  golang.org/x/sys               # go-redis
  # The OpenTelemetry API (metric and trace; never the SDK): the library
  # instruments itself through it, a no-op until the application installs
  # an SDK. These are the API modules and what they require.
  go.opentelemetry.io/otel
  go.opentelemetry.io/otel/metric
  go.opentelemetry.io/otel/trace
  go.opentelemetry.io/otel/log   # imported by package otel (its global log provider)
  go.opentelemetry.io/auto/sdk   # otel/trace: auto-instrumentation hook
  github.com/go-logr/logr        # otel: its internal error logger
  github.com/go-logr/stdr        # otel: the same, on the standard log
)
# Allowed in go.sum ONLY: checksums of what the tests of those modules
# import. go mod tidy records them so that `go test all` in the consumer
# can verify its downloads; none of them is linked into a consumer's binary
# or named in its go.mod.
sum_allowed=(
  github.com/zeebo/xxh3          # go-redis's tests
  github.com/klauspost/cpuid/v2  # go-redis's tests, through xxh3
  github.com/bsm/ginkgo/v2       # go-redis's tests
  github.com/bsm/gomega          # go-redis's tests
  github.com/stretchr/testify    # go.uber.org/atomic's tests
  go.yaml.in/yaml/v3             # go.uber.org/atomic's tests, through testify
  github.com/google/go-cmp       # the OpenTelemetry API's tests
  # The library's own test-only dependency, and the one module here that a
  # consumer of go-redis alone does not get: the tests of redlock, quorum
  # and validity check for leaked goroutines with goleak. Accepted because
  # it is small, has no dependencies that reach the consumer (its own
  # go.mod's are pruned away), is required by redlock's go.mod (so never
  # needs a line in the consumer's), and the leak checks are worth more
  # than one go.sum entry. A test helper with dependencies of its own
  # (lab -> testcontainers-go, once) is exactly what this check rejects.
  go.uber.org/goleak
)

module=$(awk '$1 == "module" { print $2; exit }' "$repo/go.mod")
gover=$(awk '$1 == "go" { print $2; exit }' "$repo/go.mod")
[ -n "$module" ] && [ -n "$gover" ] || { log "cannot read module path and go version from $repo/go.mod"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cat >"$tmp/go.mod" <<EOF
module example.com/redlock-consumer

go $gover

require $module v0.0.0

replace $module => $repo
EOF
cat >"$tmp/main.go" <<EOF
package main

import "$module/redlock"

var _ = redlock.New

func main() {}
EOF
cp "$repo/go.sum" "$tmp/go.sum"

if ! out=$(cd "$tmp" && GOWORK=off "$GO" mod tidy 2>&1); then
  log "go mod tidy in the consumer module failed:"
  echo "$out" >&2
  log "(offline, tidy needs every module it loads in the module cache: run once with the proxy reachable;"
  log " and a test import of the library from a module its go.mod does not list makes tidy look it up)"
  exit 1
fi

# Modules the consumer's go.mod requires (tidy writes the canonical form).
mods=$(awk '
  $1 == "require" && $2 == "(" { inblock = 1; next }
  inblock && $1 == ")"         { inblock = 0; next }
  inblock && NF >= 2           { print $1; next }
  $1 == "require" && NF >= 3   { print $2 }
' "$tmp/go.mod" | sort -u)
sums=$(awk 'NF { print $1 }' "$tmp/go.sum" | sort -u)

in_list() {
  local m=$1; shift
  local a
  for a in "$@"; do [ "$m" = "$a" ] && return 0; done
  return 1
}

bad=()
for m in $mods; do
  in_list "$m" "${mod_allowed[@]}" || bad+=("go.mod: $m")
done
for m in $sums; do
  in_list "$m" "${mod_allowed[@]}" "${sum_allowed[@]}" || bad+=("go.sum: $m")
done

nmods=$(printf '%s\n' $mods | grep -c . || true)
nsums=$(printf '%s\n' $sums | grep -c . || true)
if [ ${#bad[@]} -gt 0 ]; then
  log "FAIL: a module importing only $module/redlock gets, after go mod tidy, ${#bad[@]} module(s) outside the allowlist:"
  printf '  %s\n' "${bad[@]}" >&2
  log "consumer go.mod:"
  sed 's/^/  | /' "$tmp/go.mod" >&2
  exit 1
fi
took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
log "ok: the consumer's go.mod names $nmods module(s), its go.sum $nsums, all allowed (${took}s)"
