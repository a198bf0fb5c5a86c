#!/usr/bin/env bash
# README command 2 (and CI): install dependencies, then
#   1. Release build: every unit test, the ONNX conformance suite, and the end-to-end suite against
#      the real binary;
#   2. ASan+UBSan build (clang): the same against sanitized code, plus the request-parser fuzzer
#      for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Kubernetes manifests' schema check (tests/e2e/test_kubernetes.py) runs on these npm packages.
# Where the npm registry cannot be reached, those two tests skip and say so; the rest still run.
if ! (cd deploy/kubernetes/validate && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error); then
  echo "WARNING: npm ci failed in deploy/kubernetes/validate: the manifests' schema tests will be skipped" >&2
fi

echo "== release build"
bash scripts/build.sh release
echo "== release tests"
(cd build && ctest --output-on-failure -j2 -L 'unit|e2e|conformance')

echo "== sanitizer build (ASan + UBSan)"
bash scripts/build.sh sanitize
echo "== sanitizer tests and fuzzing"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/sanitizers/ubsan.supp"
(cd build-sanitize && ctest --output-on-failure -j2 -L 'unit|e2e|conformance|fuzz')
