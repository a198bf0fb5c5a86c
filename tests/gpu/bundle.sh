#!/usr/bin/env bash
# Packs what tests/gpu/nvml_check.sh needs on a machine with an NVIDIA GPU, which has none of our
# Debian packages: the release inferd, gpu_metrics_test and every shared library they link
# (glibc's own left to the machine), into .devrun/bundle.tar.xz (ignored by git; about 16 MB).
# Run after scripts/build.sh release; then, on the GPU machine from the repository root:
#   OUT=/some/dir bash tests/gpu/nvml_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
staging=$(mktemp -d)
mkdir -p "$staging/bin" "$staging/lib" .devrun
cp build/src/server/inferd build/tests/gpu_metrics_test "$staging/bin/"
strip "$staging/bin/"*
ldd build/src/server/inferd build/tests/gpu_metrics_test | awk '/=> \//{print $3}' |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | sort -u |
  while read -r lib; do cp -L "$lib" "$staging/lib/"; done
tar -C "$staging" -cJf .devrun/bundle.tar.xz .
rm -rf "$staging"
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo /.devrun/ >> .git/info/exclude
ls -l .devrun/bundle.tar.xz
