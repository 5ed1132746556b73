#!/usr/bin/env bash
# Checks and unit-tests the Prometheus rules shipped in observability/ with
# promtool. make test runs it. promtool comes with Debian's prometheus
# package, installed here when we are root; where it cannot be installed the
# check is skipped with a message saying so (it never passes silently). The
# dashboard (redlock-dashboard.json) is checked by go test ./cmd/redlock-bench:
# its queries with promtool, its metrics against a live scrape.
set -euo pipefail
cd "$(dirname "$0")/../observability"
log() { echo "check-rules: $*" >&2; }

if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "promtool missing: installing Debian's prometheus package"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; } >&2 \
      || log "apt-get install prometheus failed"
  fi
fi
if ! command -v promtool >/dev/null 2>&1; then
  log "SKIPPED: promtool is not installed and could not be (apt-get install prometheus); the rules in observability/ were not checked"
  exit 0
fi
promtool check rules redlock-rules.yml >&2
promtool test rules redlock-rules_test.yml >&2
log "ok: observability/redlock-rules.yml checked and its unit tests pass"
