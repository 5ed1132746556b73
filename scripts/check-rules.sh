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

# Several services often share one Prometheus: every aggregation keeps the
# job apart (no bare sum()/max()/min(), every "by (...)" names job), and
# the hold-time alert leaves out locks kept in the background (leaders).
bad=$(grep -nE '\b(sum|max|min|avg|count|quantile|topk|bottomk)[[:space:]]*\(' redlock-rules.yml | grep -v '^[0-9]*:[[:space:]]*#' || true)
bad+=$(grep -nE '\bby[[:space:]]*\(' redlock-rules.yml | grep -v '^[0-9]*:[[:space:]]*#' | grep -vE '\bby[[:space:]]*\([^)]*\bjob\b' || true)
if [ -n "$bad" ]; then
  log "FAILED: these rules aggregate across jobs (use sum by (job, ...)):"
  echo "$bad" >&2
  exit 1
fi
if ! grep -qE 'redlock_hold_duration_seconds_bucket\{[^}]*redlock_kept!="true"' redlock-rules.yml; then
  log "FAILED: the hold-time rule must leave out locks kept in the background (redlock_kept!=\"true\")"
  exit 1
fi

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
