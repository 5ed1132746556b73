#!/bin/sh
# build.sh — build redlock-lab/redis:local FROM scratch out of the host's
# Debian redis-server and redis-cli.
#
# Why: the lab machines have a Docker engine but no image registry, so no base
# image (not even the official redis one) can be pulled. The image holds the
# host binaries, every library `ldd` lists for them (at the same paths), the
# dynamic loader, a minimal /etc/passwd and /etc/group, and a small redis.conf.
#
# Usage: docker/redis-local/build.sh [TAG]     (default redlock-lab/redis:local)
# Env:   REDIS_SERVER, REDIS_CLI override the binaries to package.
set -eu

tag=${1:-redlock-lab/redis:local}
here=$(cd "$(dirname "$0")" && pwd)
server=${REDIS_SERVER:-$(command -v redis-server || true)}
cli=${REDIS_CLI:-$(command -v redis-cli || true)}

die() { echo "build.sh: $*" >&2; exit 1; }
[ -n "$server" ] && [ -x "$server" ] || die "redis-server not found (apt-get install redis-server)"
[ -n "$cli" ] && [ -x "$cli" ] || die "redis-cli not found (apt-get install redis-tools)"
command -v ldd >/dev/null || die "ldd not found"
command -v docker >/dev/null || die "docker not found"

ctx=$(mktemp -d "${TMPDIR:-/tmp}/redis-local.XXXXXX")
trap 'rm -rf "$ctx"' EXIT INT TERM
root=$ctx/rootfs
mkdir -p "$root/usr/bin" "$root/etc" "$ctx/data"

# Debian ships redis-server as a symlink to redis-check-rdb; the binary picks
# its mode from argv[0], so copy the target under the name redis-server.
cp -L "$server" "$root/usr/bin/redis-server"
cp -L "$cli" "$root/usr/bin/redis-cli"

# Every library either binary needs, plus the loader, at the path ldd prints
# (that is where the loader and PT_INTERP look), dereferenced: on usrmerged
# Debian /lib and /lib64 are symlinks, which must not be copied as links.
libs=""
for bin in "$server" "$cli"; do
	out=$(ldd "$bin") || die "ldd $bin failed (static or foreign binary?)"
	case $out in *"not found"*) die "ldd $bin: missing library:
$out" ;; esac
	libs="$libs
$(echo "$out" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')"
done
libs=$(echo "$libs" | sed '/^$/d' | sort -u)
[ -n "$libs" ] || die "ldd listed no libraries"
for lib in $libs; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done

# A minimal user database: redis-server runs as 999 (USER in the Dockerfile)
# and getpwuid should find a name for it.
cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/sbin/nologin
redis:x:999:999:redis:/data:/sbin/nologin
PW
cat >"$root/etc/group" <<'GR'
root:x:0:
redis:x:999:
GR

cp "$here/Dockerfile" "$here/redis.conf" "$ctx/"

echo "build.sh: packaging $(readlink -f "$server") and $(readlink -f "$cli") with $(echo "$libs" | wc -l) libraries as $tag" >&2
docker build -t "$tag" "$ctx"
