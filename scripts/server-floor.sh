#!/usr/bin/env bash
# server-floor.sh [N] — one master's CPU for the commands of one
# acquisition, at the best batching a client can give it.
#
# Starts a throwaway redis-server on a free loopback port, loads
# redlock/scripts/release.lua, and pipes N (default 100000) pairs of
# "SET key token NX PX 10000" and "EVALSHA <release> 1 key token" through
# redis-cli --pipe: one connection, every command already written, so the
# server reads and answers in the largest batches it can. Prints the
# server's CPU time (INFO cpu: used_cpu_user + used_cpu_sys) per pair, and
# its command handlers' time (INFO commandstats usec), which leaves out
# reading, parsing and writing. Five masters take five pairs per
# acquisition. See docs/bench.md, "Where one acquisition's CPU goes".
set -euo pipefail
n=${1:-100000}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli PING >/dev/null 2>&1 && break; sleep 0.1; done
sha=$(cli SCRIPT LOAD "$(cat "$here/redlock/scripts/release.lua")")
awk -v n="$n" -v sha="$sha" 'BEGIN { for (i = 0; i < n; i++) { printf "SET k%d tok NX PX 10000\r\nEVALSHA %s 1 k%d tok\r\n", i, sha, i } }' >"$dir/cmds"
cpu() { cli INFO cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
cli CONFIG RESETSTAT >/dev/null
before=$(cpu)
cli --pipe <"$dir/cmds" >/dev/null
after=$(cpu)
usec=$(cli INFO commandstats | awk -F'[=,:]' '/^cmdstat_(set|evalsha):/ { s += $5 } END { print s }')
awk -v b="$before" -v a="$after" -v u="$usec" -v n="$n" 'BEGIN {
  printf "server CPU per SET + release pair: %.2f µs; command handlers (SET + EVALSHA): %.2f µs\n", (a - b) * 1e6 / n, u / n
}'
