#!/usr/bin/env bash
# tidy-modules.sh — go mod tidy in every module of go.work.
#
# go mod tidy ignores the workspace, and a nested module requires the
# others at a release tag (v0.1.0) that may not be published yet. So, for
# each module, this adds go.work's replace lines to its go.mod for the
# length of the tidy (paths made relative to the module), runs
# GOWORK=off go mod tidy, and drops them again: no go.mod keeps a replace
# (docs/releasing.md). go.sum gets no lines for this repository's modules;
# the workspace needs none.
set -euo pipefail
GO=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

dirs=$("$GO" work edit -json | awk -F'"' '$2 == "DiskPath" { print $4 }')
# "path version dir" for each replace of go.work.
reps=$("$GO" work edit -json | awk -F'"' '
  $2 == "Old" { old = 1 } $2 == "New" { old = 0 }
  $2 == "Path" && old { p = $4 } $2 == "Version" && old { v = $4 }
  $2 == "Path" && !old { print p, v, $4 }')

for d in $dirs; do
  mod="$root/$d"
  add=() drop=()
  while read -r p v dir; do
    [ -n "$p" ] || continue
    [ "$(cd "$root/$dir" && pwd)" = "$(cd "$mod" && pwd)" ] && continue
    rel=$(realpath --relative-to="$mod" "$root/$dir")
    case $rel in ../*) ;; *) rel=./$rel ;; esac
    add+=(-replace "$p@$v=$rel")
    drop+=(-dropreplace "$p@$v")
  done <<<"$reps"
  echo "tidy-modules: $d" >&2
  (cd "$mod" && {
    [ ${#add[@]} -eq 0 ] || "$GO" mod edit "${add[@]}"
    rc=0; GOWORK=off "$GO" mod tidy || rc=$?
    [ ${#drop[@]} -eq 0 ] || "$GO" mod edit "${drop[@]}"
    exit $rc
  })
done
