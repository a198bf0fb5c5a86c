#!/usr/bin/env bash
# Builds the runtime tree of inferd into PREFIX (default dist/inferd), without Docker: what the
# container image's runtime stage copies (deploy/Dockerfile), so what the image holds is tested here
# (tests/e2e/test_install.py, scripts/check-runtime-image.sh).
#   PREFIX/bin/inferd                              the server (stripped)
#   PREFIX/share/inferd/model_repository/          the bundled example models
#   PREFIX/share/inferd/runtime-packages.txt       the Debian packages owning the shared libraries
#                                                  inferd loads: all a debian:12-slim needs besides
# Uses build/ (scripts/build.sh release); builds it first when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "${1:-dist/inferd}")"
[ -x build/src/server/inferd ] || bash scripts/build.sh release
rm -rf "$prefix"
cmake --install build --prefix "$prefix" --strip >/dev/null

# The packages behind every shared library the binary resolves (libc6 included: slim has it, and
# listing it costs nothing). A library that resolves to no package would be missing in the image.
packages="$prefix/share/inferd/runtime-packages.txt"
owners=()
unowned=()
for library in $(ldd "$prefix/bin/inferd" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
  owner="$(dpkg -S "$(realpath "$library")" 2>/dev/null || dpkg -S "$library" 2>/dev/null || true)"
  if [ -n "$owner" ]; then owners+=("${owner%%:*}"); else unowned+=("$library"); fi
done
printf '%s\n' "${owners[@]}" | sort -u > "$packages"
if ldd "$prefix/bin/inferd" | grep -q "not found"; then
  echo "install.sh: unresolved libraries:" >&2
  ldd "$prefix/bin/inferd" | grep "not found" >&2
  exit 1
fi
if [ "${#unowned[@]}" -gt 0 ]; then
  echo "install.sh: libraries no Debian package owns (the image would lack them): ${unowned[*]}" >&2
  exit 1
fi
echo "installed $prefix ($(du -sh "$prefix" | cut -f1)); runtime packages: $(tr '\n' ' ' < "$packages")"
