#!/usr/bin/env bash
# mutations.sh [NAME...] — show that the simulator catches planted bugs.
#
# Each redlock/testdata/mutations/NN-name.patch plants one protocol bug in
# the library's production code (its first line says which). For each
# patch (or those whose file name starts with a NAME given, e.g. 03 or
# 03-grant), this script makes a throw-away worktree of the repository at
# HEAD, applies the patch, builds the test binary (go test -c) and runs the
# check that must catch it, with GOMAXPROCS=1 and CPU_LIMIT seconds of CPU
# (ulimit -t, default 60):
#
#   - a patch to Go code: TestSim (redlock/sim_long_test.go) over seeds
#     from 1 until the first violation inside the assumptions. A failing
#     (row, seed) counts only if the unmutated code passes it (replayed
#     with -sim.rows and -sim.seed); if it does not, the search goes on
#     from the next seed, in what is left of the CPU limit.
#   - a patch to redlock/scripts/*.lua alone: the simulated masters run
#     Go models of the scripts, not the scripts, so the check is
#     TestDifferential (internal/sim), the models against a real
#     redis-server running the mutated script. It needs redis-server
#     (apt-get install -y redis-server).
#
# It prints one markdown table row per patch: the mutation, what caught it
# (the checker, the first word of the violation, and the row; or the
# differential test), the seed, and the CPU seconds of the test binary (for
# TestSim, its own report of the CPU spent inside the assumptions; for
# TestDifferential, user + sys as bash's time reports them), or NOT CAUGHT.
# Exits non-zero if any patch is not caught (or does not apply, or does not
# build). Run it from anywhere in the repository; make mutations runs it.
set -uo pipefail

GO=${GO:-go}
CPU_LIMIT=${CPU_LIMIT:-60}
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$repo/redlock/testdata/mutations
tmp=$(mktemp -d)
worktrees=()
cleanup() {
	for wt in "${worktrees[@]}"; do
		git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
log() { echo "mutations: $*" >&2; }

patches=()
for p in "$dir"/*.patch; do
	name=$(basename "$p" .patch)
	if [ $# -eq 0 ]; then
		patches+=("$p")
		continue
	fi
	for a in "$@"; do
		case $name in "$a"*)
			patches+=("$p")
			break
			;;
		esac
	done
done
[ ${#patches[@]} -gt 0 ] || { log "no patch in $dir matches: $*"; exit 2; }

# worktree NAME: a detached worktree of HEAD at $tmp/NAME (in $made),
# removed on exit.
worktree() {
	made=$tmp/$1
	git -C "$repo" worktree add --detach --quiet "$made" HEAD || return 1
	worktrees+=("$made")
}

# seconds DURATION: a Go duration (1m2.5s, 840ms, 3.2s) in seconds.
seconds() {
	awk -v d="$1" 'BEGIN {
		t = 0
		while (match(d, /^[0-9.]+(h|ms|µs|us|ns|m|s)/)) {
			u = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
			n = u + 0; sub(/^[0-9.]+/, "", u)
			t += n * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : u == "ms" ? 1e-3 : u == "ns" ? 1e-9 : 1e-6)
		}
		printf "%.1f", t
	}'
}

# cpu_of FILE: user + sys from the line "CPU u s" (bash's time, TIMEFORMAT).
cpu_of() { awk '/^CPU [0-9.]+ [0-9.]+$/ { printf "%.1f", $2 + $3 }' "$1"; }

# clean_bin PKG: the unmutated test binary of PKG (redlock or
# internal/sim), built once in the worktree $clean, to replay what a
# mutant fails. Sets cleanbin.
clean=""
clean_bin() {
	if [ -z "$clean" ]; then
		worktree clean || return 1
		clean=$made
	fi
	cleanbin=$tmp/clean-${1//\//-}.test
	[ -x "$cleanbin" ] || (cd "$clean" && $GO test -c -o "$cleanbin" "./$1")
}

# sim WT NAME: TestSim on the mutant in WT; prints the table row.
sim() {
	local wt=$1 name=$2 bin=$tmp/$2.test seed=1 used=0 out
	(cd "$wt" && $GO test -c -o "$bin" ./redlock) || { echo "| $name | NOT CAUGHT (does not build) | | |"; return 1; }
	clean_bin redlock || { echo "| $name | NOT CAUGHT (the unmutated code does not build) | | |"; return 1; }
	while :; do
		local left=$((CPU_LIMIT - ${used%.*}))
		[ "$left" -ge 1 ] || break
		out=$tmp/$name.$seed.out
		(
			cd "$wt/redlock" && ulimit -t "$left" &&
				GOMAXPROCS=1 "$bin" -test.run 'TestSim$' -test.v -sim.outside=false \
					-sim.sections=1000000000 -sim.seed "$seed" >"$out" 2>&1
		) 2>/dev/null # (not the shell's word that the limit killed it)
		# The CPU spent inside the assumptions, as the run reports it;
		# a run killed at the limit has used what was left.
		local cpu
		cpu=$(sed -nE 's/.* sections inside the assumptions .* in ([^ ]+) of CPU.*/\1/p' "$out" | head -1)
		if [ -n "$cpu" ]; then cpu=$(seconds "$cpu"); else cpu=$left; fi
		used=$(awk -v a="$used" -v b="$cpu" 'BEGIN { printf "%.1f", a + b }')
		local line row fseed check
		line=$(grep -m1 'replay with' "$out") || break
		row=$(sed -E 's/.*row ([^:]+): replay.*/\1/' <<<"$line")
		fseed=$(sed -E 's/.*-sim\.seed ([0-9]+).*/\1/' <<<"$line")
		check=$(grep -m1 -A1 -E "^ +seed $fseed: [0-9]+ violations" "$out" | tail -1 | awk '{ print $1 }')
		# Caught only if the unmutated code passes that row and seed.
		if (cd "$clean/redlock" && GOMAXPROCS=1 "$cleanbin" -test.run 'TestSim$' -test.v -sim.outside=false \
			-sim.rows "^$row\$" -sim.seed "$fseed" -sim.sections=1 >"$out.clean" 2>&1); then
			echo "| $name | $check, row $row | $fseed | $used |"
			return 0
		fi
		log "$name: row $row seed $fseed fails on the unmutated code too; searching on from seed $((fseed + 1))"
		seed=$((fseed + 1))
	done
	echo "| $name | NOT CAUGHT (TestSim, $used s of CPU) | | |"
	return 1
}

# differential WT NAME: TestDifferential on the mutated scripts in WT.
differential() {
	local wt=$1 name=$2 bin=$tmp/$2.sim.test out=$tmp/$2.diff.out
	if ! command -v redis-server >/dev/null; then
		echo "| $name | NOT CAUGHT (TestDifferential needs redis-server: apt-get install -y redis-server) | | |"
		return 1
	fi
	(cd "$wt" && $GO test -c -o "$bin" ./internal/sim) || { echo "| $name | NOT CAUGHT (does not build) | | |"; return 1; }
	(
		cd "$wt/internal/sim" && ulimit -t "$CPU_LIMIT" && TIMEFORMAT='CPU %U %S' &&
			time GOMAXPROCS=1 "$bin" -test.run 'TestDifferential$' -test.v -sim.seed 1 >"$out" 2>&1
	) 2>"$out.time"
	local line seed
	line=$(grep -m1 -E 'differential test: seed [0-9]+:' "$out")
	if [ -z "$line" ]; then
		echo "| $name | NOT CAUGHT (TestDifferential, $(cpu_of "$out.time") s of CPU$(grep -q -- '--- SKIP' "$out" && echo ', skipped')) | | |"
		return 1
	fi
	seed=$(sed -E 's/.*differential test: seed ([0-9]+):.*/\1/' <<<"$line")
	# Caught only if the unmutated scripts agree with their models on
	# that sequence.
	clean_bin internal/sim || { echo "| $name | NOT CAUGHT (the unmutated code does not build) | | |"; return 1; }
	if ! (cd "$clean/internal/sim" && "$cleanbin" -test.run 'TestDifferential$' -sim.seed "$seed" -sim.sequences 1 >"$out.clean" 2>&1); then
		echo "| $name | NOT CAUGHT (seed $seed fails on the unmutated scripts too) | | |"
		return 1
	fi
	echo "| $name | TestDifferential (real redis-server against the script models) | $seed | $(cpu_of "$out.time") |"
}

echo "| Mutation | Caught by | Seed | CPU s |"
echo "|---|---|---|---|"
failed=0
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	worktree "$name" || { echo "| $name | NOT CAUGHT (no worktree) | | |"; failed=1; continue; }
	wt=$made
	if ! git -C "$wt" apply "$p"; then
		echo "| $name | NOT CAUGHT (the patch does not apply) | | |"
		failed=1
		continue
	fi
	files=$(git -C "$wt" diff --name-only)
	if ! grep -qv '^redlock/scripts/.*\.lua$' <<<"$files"; then
		differential "$wt" "$name" || failed=1
	else
		sim "$wt" "$name" || failed=1
	fi
	git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1
done
exit $failed
