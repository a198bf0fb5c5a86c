#!/usr/bin/env bash
# Checks the container image's runtime stage without Docker (which this project's machines cannot
# run): builds the Dockerfile's runtime tree on a minimal Debian 12 root filesystem (debootstrap
# --variant=minbase, what debian:12-slim is made from) exactly as the Dockerfile's second stage does
# (the install prefix, `apt-get install` of its runtime-packages.txt, a non-root user), then, in a
# chroot as that user, serves the bundled example repository, answers the image's HEALTHCHECK
# (`inferd health`) and an inference, drains on SIGTERM, and reports the tree's size.
#   sudo bash scripts/check-runtime-image.sh        (root: debootstrap, chroot; a few minutes)
# The base system is kept as a tarball (RUNTIME_BASE, default /var/tmp/fresh-bookworm.tar, the one
# ../shared/tools/fresh-machine-check makes) and unpacked afresh each run.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${RUNTIME_BASE:-/var/tmp/fresh-bookworm.tar}"
root="${RUNTIME_ROOT:-/var/tmp/inferd-runtime-root}"
port="${RUNTIME_PORT:-18000}"

bash scripts/install.sh "$PWD/build/runtime-prefix" >/dev/null
if [ ! -f "$base" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq; apt-get install -y -qq debootstrap >/dev/null; }
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  tmp=$(mktemp -d); debootstrap --variant=minbase bookworm "$tmp" "$mirror" >/dev/null
  tar -C "$tmp" -cf "$base" .; rm -rf "$tmp"
fi
cleanup() {
  pkill -f "$root/opt/inferd/bin/inferd" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
}
cleanup; rm -rf "$root"; mkdir -p "$root"; tar -C "$root" -xf "$base"
chmod 755 "$root"  # the tarball's top is mktemp's 0700, which the non-root user could not enter
trap cleanup EXIT
for d in sources.list.d apt.conf.d auth.conf.d trusted.gpg.d; do
  [ -d "/etc/apt/$d" ] && cp -a "/etc/apt/$d/." "$root/etc/apt/$d/" 2>/dev/null || true
done
[ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$root/etc/apt/" || true
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Sizes without apt's download cache, which the Dockerfile's `apt-get clean` leaves out of the image.
size_mb() { du -sm --exclude="$root/proc" --exclude="$root/var/cache/apt" "$root" | cut -f1; }
base_mb=$(size_mb)

# The Dockerfile's runtime stage, step by step.
cp -a build/runtime-prefix "$root/opt/inferd"
mount -t proc proc "$root/proc"
in_root() { chroot "$root" /usr/bin/env -i PATH=/opt/inferd/bin:/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get update -qq 2>/dev/null  # (warnings about this machine's duplicated sources)
in_root sh -c 'xargs -a /opt/inferd/share/inferd/runtime-packages.txt apt-get install -y -qq --no-install-recommends >/dev/null'
in_root sh -c 'apt-get clean && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin inferd && mkdir /models && cp -r /opt/inferd/share/inferd/model_repository/. /models/ && chown -R inferd /models'
image_mb=$(size_mb)
for compiler in gcc g++ cc c++ clang; do
  if [ -e "$root/usr/bin/$compiler" ]; then echo "FAIL: the runtime tree holds a compiler ($compiler)"; exit 1; fi
done

# The image's ENTRYPOINT as user 10001, its HEALTHCHECK, one inference, the drain.
chroot --userspec=10001:10001 "$root" /usr/bin/env -i PATH=/opt/inferd/bin:/usr/bin:/bin \
  inferd serve --model-repository /models --http-address 127.0.0.1 --http-port "$port" \
  --grpc-port $((port + 1)) --metrics-port $((port + 2)) > "$root/tmp/inferd.log" 2>&1 &
server=$!
healthy=""
for _ in $(seq 120); do
  if in_root inferd health -u "127.0.0.1:$port" >/dev/null 2>&1; then healthy=yes; break; fi
  sleep 1
done
[ -n "$healthy" ] || { echo "FAIL: the HEALTHCHECK never passed"; cat "$root/tmp/inferd.log"; exit 1; }
answer=$(in_root inferd infer -u "127.0.0.1:$port" -m add_sub 2>&1) ||
  { echo "FAIL: inference: $answer"; exit 1; }
user=$(ps -o uid= -p "$server" | tr -d ' ')
[ "$user" = 10001 ] || { echo "FAIL: the server runs as uid $user, not 10001"; exit 1; }
kill -TERM "$server"; wait "$server" && rc=0 || rc=$?
[ "$rc" = 0 ] || { echo "FAIL: exit $rc after SIGTERM"; cat "$root/tmp/inferd.log"; exit 1; }
echo "runtime image check passed: served /models as uid $user, HEALTHCHECK ok, add_sub answered, drained on SIGTERM"
echo "sizes (du, MB, apt's cache excluded): minbase $base_mb; with the runtime packages, inferd and the examples" \
     "$image_mb (+$((image_mb - base_mb))); inferd prefix $(du -sm "$root/opt/inferd" | cut -f1)"
echo "runtime packages: $(tr '\n' ' ' < build/runtime-prefix/share/inferd/runtime-packages.txt)"
