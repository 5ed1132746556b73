#!/usr/bin/env bash
# mutate.sh [PKG...] — mutation testing of the protocol code by a tool.
#
# Runs gremlins (github.com/go-gremlins/gremlins, installed with go install
# if missing) over the packages that decide the protocol: validity, quorum,
# internal/wait and, in package redlock, the files listed in REDLOCK_FILES
# below (rounds, validity, waits, hand-off, keeping, semaphore, read-write
# lock, election). Each mutant is one small change to one operator (< to
# <=, + to -, a condition negated, ...); the package's tests then run, and
# the mutant is KILLED if they fail, LIVED if they pass, NOT COVERED if no
# test of the fast set runs its line, TIMED OUT if they take longer than
# the coefficient times the unmutated run.
#
# The fast set: validity, quorum and internal/wait run all their tests
# (all in memory). Package redlock runs only the tests in REDLOCK_RUN
# (passed as GOFLAGS=-run=..., which go test honours and gremlins passes
# through): the simulator's short run (TestSim), replay and regression
# seeds (TestSimSwarmRegressions), and the tests
# that need no redis-server (in-memory streams, the waker and the wait's
# state, the command wire format, the mutate_*_test.go checks, and the
# hand-off, queue, wake and expiry tests on the in-memory world of
# *_mem_test.go: real Lockers over shared simulated masters). The
# tests on real masters are left out: each mutant's run then takes seconds
# (mostly TestSim), not minutes.
#
# Each module runs with GOWORK=off (gremlins copies one module and resolves
# its dependencies from its own go.mod); the four packages are in the root
# module. For each package it writes $MUTATE_OUT/<pkg>.json (gremlins'
# report) and prints one markdown table row: killed, lived, not covered,
# timed out, not viable, efficacy (killed / (killed + lived)), efficacy
# with the mutants listed in scripts/mutate-equivalent.txt left out, and
# mutant coverage as gremlins counts it ((killed + lived) / (killed +
# lived + not covered)). The LIVED
# mutants not listed as equivalent are printed after the table.
#
# Environment: GO (go), MUTATE_OUT (a new temporary directory),
# MUTATE_WORKERS (1: TestSim already uses every CPU), MUTATE_TIMEOUT
# (gremlins' --timeout-coefficient: by default 10 for the small packages,
# whose unmutated run is mostly the build, and 3 for redlock),
# GREMLINS_VERSION (v0.6.0, the one the record in
# docs/decisions/2026-12-06-mutation-testing.md used), MUTATE_DRY=1 (list
# the mutants, run none), MUTATE_FILES (of package redlock's files below,
# the ones to mutate), MUTATE_REPORT=DIR (count the logs of an earlier
# run, below). make mutate runs it (MUTATE_PKGS for some).
set -uo pipefail

GO=${GO:-go}
GREMLINS_VERSION=${GREMLINS_VERSION:-v0.6.0}
MUTATE_WORKERS=${MUTATE_WORKERS:-1}
MUTATE_DRY=${MUTATE_DRY:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
equivalent=$repo/scripts/mutate-equivalent.txt
log() { echo "mutate: $*" >&2; }

# The redlock files that decide the protocol (with the files that took
# the constructors and declarations of locker.go, lock.go, keeper.go and
# keepbatch.go: newlocker.go, lockerstate.go, lockrecord.go, target.go,
# cmdreplies.go); the others (transport, streams, telemetry, options,
# errors, scripts' loading) are left out.
# MUTATE_FILES (a space-separated list of them) mutates only those.
REDLOCK_FILES="locker.go newlocker.go lockerstate.go lockrecord.go target.go acquiring.go round.go lock.go wait.go wake.go announce.go grant.go subscriptions.go watch.go expiry.go queue.go keep.go keeper.go keepbatch.go cmdreplies.go pace.go semaphore.go rwmutex.go election.go primitives.go"
REDLOCK_FILES=${MUTATE_FILES:-$REDLOCK_FILES}
# Package redlock's fast set: no test here starts a redis-server.
REDLOCK_RUN='^(TestSim|TestSimReplay|TestSimSwarmRegressions|TestMemStream.*|TestCommandWire|TestWriterRefusalAndPlace|TestExpiresAt|TestAcqRecordOutcome|TestGivenBackGrantsDoNotCount|TestNoHandedLockOnceClosing|TestClientPubSubReopens|TestParseAnnouncement|TestMalformedAnnouncementIgnored|TestMutate.*|TestHandedLockCountsValidityFromItsJoin|TestReleaseSkipsAHandedHeadNobodyHears|TestUnlockOfHandedLockLeavesNoQueueEntry|TestGrantWaiterThatGivesUpLeavesNoKey|TestGrantWaiterThatWinsARoundLeavesNoRecord|TestSplitGrantsResolve|TestReleaseHandsAnAbsentKeyToTheHead|TestHandedLockIsLoggedAsAcquired|TestMinorityOfGrantsCompletesWhereTheKeyIsFree|TestAdoptOfHandedLockDeadlineBound|TestReleaseHandsOnToOneWaiterAcrossLockers|TestDeadWaiterInQueueIsDropped|TestQueuedWaitersAcquireWhenEveryMessageIsLost|TestWaiterThatGivesUpLeavesTheQueue|TestWaiterBehindDeadHeadAcquiresWhenHolderVanishes|TestReleaseWakesOneWaiter|TestWaiterAcquiresWhenTheReleaseMessageIsLost|TestCloseWhileWaiting|TestWriterReleaseWakesEveryReader|TestRWMutexWriterBehindInQueueGoesNext|TestWaiterAcquiresWhenDeadHoldersKeysExpire|TestWaiterAcquiresWhenKeysExpireBeforeItsRead)$'

pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(validity quorum internal/wait redlock)

gremlins=$(command -v gremlins || true)
[ -n "$gremlins" ] || gremlins=$("$GO" env GOPATH)/bin/gremlins
if [ ! -x "$gremlins" ]; then
	log "installing gremlins $GREMLINS_VERSION"
	GOWORK=off "$GO" install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION" || exit 1
fi
command -v jq >/dev/null 2>&1 || { log "needs jq (apt-get install -y jq)"; exit 1; }

# MUTATE_REPORT=DIR: run nothing, count the logs a run left in DIR (one
# stopped part-way included).
MUTATE_REPORT=${MUTATE_REPORT:-}
# MUTATE_RECHECK=DIR: run again, against the fast set as it is now, each
# mutant an earlier run left LIVED in DIR (not listed as equivalent), in a
# copy of the repository, with scripts/mutant applying gremlins' token
# change at the logged position; writes DIR/<pkg>.recheck (position,
# mutator, KILLED, LIVED, TIMED OUT or MOVED when the position no longer
# holds the token) and counts a recheck's kill as killed in the table.
MUTATE_RECHECK=${MUTATE_RECHECK:-}
[ -z "$MUTATE_RECHECK" ] || MUTATE_REPORT=$MUTATE_RECHECK
out=${MUTATE_REPORT:-${MUTATE_OUT:-$(mktemp -d)}}
mkdir -p "$out"
log "gremlins $("$gremlins" --version 2>&1 | head -1); reports in $out"

# recheck PKG GOFLAGS MUTANTS: one line per LIVED mutant of MUTANTS not
# listed as equivalent, run in a copy of the repository (see MUTATE_RECHECK).
recheck() {
	local pkg=$1 flags=$2 copy pos typ file at rc args
	copy=$(mktemp -d)
	(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$copy"
	(cd "$repo" && GOWORK=off "$GO" build -o "$copy/.mutant" ./scripts/mutant) || return 1
	grep ' LIVED$' "$3" | while read -r pos typ _; do
		grep -q "^$pos $typ\b" "$equivalent" 2>/dev/null && continue
		file=${pos%%:*} at=${pos#*:}
		cp "$copy/$file" "$copy/.orig"
		if ! "$copy/.mutant" "$copy/$file" "$at" "$typ" >/dev/null 2>&1; then
			echo "$pos $typ MOVED"
			continue
		fi
		args=(test -count=1 -timeout "${MUTATE_RECHECK_TIMEOUT:-5m}")
		[ "$pkg" = redlock ] && args+=(-tags mutate)
		(cd "$copy" && GOWORK=off GOFLAGS="$flags" "$GO" "${args[@]}" "./$pkg" >"$copy/.out" 2>&1)
		rc=$?
		cp "$copy/.orig" "$copy/$file"
		if [ $rc -eq 0 ]; then echo "$pos $typ LIVED"
		elif grep -q 'panic: test timed out' "$copy/.out"; then echo "$pos $typ TIMED OUT"
		else echo "$pos $typ KILLED"; fi
		log "recheck $pos $typ: rc $rc"
	done
	rm -rf "$copy"
}

rows=()
survivors=()
failed=0
for pkg in "${pkgs[@]}"; do
	pkg=${pkg%/}
	name=${pkg//\//-}
	# The timeout is the coefficient times the unmutated run: a small
	# package's run is mostly the build, which a loaded machine stretches.
	coef=${MUTATE_TIMEOUT:-10}
	[ "$pkg" = redlock ] && coef=${MUTATE_TIMEOUT:-3}
	args=(unleash --workers "$MUTATE_WORKERS" --timeout-coefficient "$coef" -o "$out/$name.json")
	[ -n "$MUTATE_DRY" ] && args+=(--dry-run)
	# -count=1: the unmutated run that sets the timeout is not a cached one.
	goflags="${GOFLAGS:-} -count=1"
	if [ "$pkg" = redlock ]; then
		goflags="$goflags -run=$REDLOCK_RUN"
		args+=(--tags mutate)
		for f in $(cd "$repo/redlock" && ls ./*.go | sed 's|^\./||' | grep -v '_test\.go$'); do
			case " $REDLOCK_FILES " in *" $f "*) ;; *) args+=(--exclude-files "^${f//./\\.}\$") ;; esac
		done
		# Nothing below the package (scripts/, testdata/) is mutated.
		args+=(--exclude-files "/")
	fi
	start=$(date +%s) rc=0
	if [ -z "$MUTATE_REPORT" ]; then
		log "$pkg: GOWORK=off GOFLAGS='$goflags' gremlins ${args[*]} ./$pkg"
		(cd "$repo" && GOWORK=off GOFLAGS="$goflags" "$gremlins" "${args[@]}" "./$pkg") >"$out/$name.log" 2>&1
		rc=$?
	fi
	secs=$(($(date +%s) - start))
	# One line per mutant, from gremlins' log (so that a run stopped
	# part-way still counts what it did): pkg/file:line:col TYPE STATUS.
	sed -nE 's/^ *(KILLED|LIVED|NOT COVERED|TIMED OUT|NOT VIABLE|SKIPPED|RUNNABLE) ([A-Z_]+) at (.*)$/'"${pkg//\//\\/}"'\/\3 \2 \1/p' \
		"$out/$name.log" >"$out/$name.mutants"
	if [ ! -s "$out/$name.mutants" ]; then
		log "$pkg: gremlins failed (exit $rc); see $out/$name.log"
		tail -20 "$out/$name.log" >&2
		failed=1
		continue
	fi
	[ $rc -eq 0 ] || { log "$pkg: gremlins exit $rc (see $out/$name.log); counting the mutants it reported"; failed=1; }
	[ -z "$MUTATE_RECHECK" ] || recheck "$pkg" "$goflags" "$out/$name.mutants" >"$out/$name.recheck"
	eq=$(grep -v '^#' "$equivalent" 2>/dev/null | awk 'NF { print $1 " " $2 }' | sort -u)
	if [ -n "$MUTATE_RECHECK" ] && [ -s "$out/$name.recheck" ]; then
		# A LIVED mutant the recheck killed counts as KILLED (only in a
		# recheck: a plain MUTATE_REPORT of DIR counts the run as it was).
		awk 'NR == FNR { if ($3 == "KILLED") dead[$1 " " $2] = 1; next }
			($1 " " $2) in dead && $3 == "LIVED" { $3 = "KILLED" } { print }' \
			"$out/$name.recheck" "$out/$name.mutants" >"$out/$name.mutants.now"
		mv "$out/$name.mutants.now" "$out/$name.mutants"
	fi
	read -r k l nc to nv le <<<"$(awk -v eq="$eq" '
		BEGIN { n = split(eq, e, "\n"); for (i = 1; i <= n; i++) equiv[e[i]] = 1 }
		{ st = $3; for (i = 4; i <= NF; i++) st = st " " $i }
		st == "KILLED" { k++ } st == "LIVED" { l++; if (($1 " " $2) in equiv) le++ }
		st == "NOT COVERED" { nc++ } st == "TIMED OUT" { to++ } st == "NOT VIABLE" { nv++ }
		END { printf "%d %d %d %d %d %d\n", k, l, nc, to, nv, le }' "$out/$name.mutants")"
	pct() { if [ "$2" -gt 0 ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f %%", 100 * a / b }'; else echo "n/a"; fi; }
	rows+=("| $pkg | $k | $l | $le | $nc | $to | $nv | $(pct "$k" $((k + l))) | $(pct "$k" $((k + l - le))) | $(pct $((k + l)) $((k + l + nc))) | $([ -n "$MUTATE_REPORT" ] && echo "-" || echo "${secs} s") |")
	while read -r pos typ st; do
		grep -q "^$pos $typ\b" "$equivalent" 2>/dev/null || survivors+=("$pos $typ")
	done < <(grep ' LIVED$' "$out/$name.mutants")
done

echo
echo "| package | killed | lived | of which equivalent | not covered | timed out | not viable | efficacy | efficacy without equivalent | mutant coverage | time |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if [ ${#survivors[@]} -gt 0 ]; then
	echo
	echo "lived, not listed in scripts/mutate-equivalent.txt:"
	printf '  %s\n' "${survivors[@]}"
fi
exit $failed
