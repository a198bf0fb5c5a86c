#!/usr/bin/env bash
# README command 1: install dependencies, build a Release inferd, serve examples/model_repository
# on HTTP port 8000, gRPC port 8001 and metrics port 8002. Extra arguments go to `inferd serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
exec ./build/src/server/inferd serve --model-repository examples/model_repository \
  --http-port 8000 --grpc-port 8001 --metrics-port 8002 "$@"
