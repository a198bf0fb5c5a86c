#!/usr/bin/env bash
# Configures and builds one flavour of inferd.
#   scripts/build.sh release   -> build/         (gcc, -O3; what `serve` and the benchmarks use)
#   scripts/build.sh sanitize  -> build-sanitize/ (clang, ASan + UBSan, libFuzzer targets)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour="${1:-release}"
jobs="${INFERD_BUILD_JOBS:-$(nproc)}"
case "$flavour" in
  release)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$jobs"
    ;;
  sanitize)
    CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DINFERD_SANITIZE=ON -DINFERD_FUZZ=ON >/dev/null
    cmake --build build-sanitize -j "$jobs"
    ;;
  *)
    echo "usage: $0 release|sanitize" >&2
    exit 2
    ;;
esac
