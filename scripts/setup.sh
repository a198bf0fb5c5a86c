#!/usr/bin/env bash
# Installs everything inferd needs to build and test (with --build, only to build; with --bench,
# to benchmark too), from Debian 12 packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

# What building inferd needs (`scripts/setup.sh --build`: the container image's build stage).
PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev            # libFuzzer and sanitizer runtimes
  # libraries (see docs/ARCHITECTURE.md, "Dependencies")
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc  # the gRPC frontend (grpc_cpp_plugin generates the service)
  libboost1.74-dev                    # Asio + Beast (header-only)
  rapidjson-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev
  libonnx-dev libdnnl-dev             # the runtime: ONNX protobuf classes, oneDNN
  libhwy-dev                          # Highway: our own kernels, one source for every SIMD target (runtime/kernels/simd)
  libturbojpeg0-dev libpng-dev        # image_preprocess: JPEG and PNG decoding
  # Debian's oneDNN is built with its OpenCL GPU runtime: its CMake config (find_package(dnnl))
  # looks for the OpenCL headers and loader and links DNNL::dnnl to OpenCL::OpenCL. libdnnl-dev
  # only *recommends* this package, and recommends are not installed here.
  ocl-icd-opencl-dev
)
# What testing it needs besides.
TEST_PACKAGES=(
  libonnx-testdata                    # ONNX backend test suite (tests/conformance)
  # end-to-end tests
  curl python3 python3-requests python3-pytest procps
  python3-grpcio                      # the gRPC end-to-end tests (stubs made by grpc_python_plugin)
  python3-onnx python3-numpy          # ONNX models built by tests and examples/onnx/make_models.py
  python3-torch python3-torchvision   # models/make_real_models.py: real models and their references
  python3-pil                         # the image pipeline's reference (tests/e2e/test_image_pipeline.py)
  python3-yaml                        # tests/e2e/test_kubernetes.py reads the manifests
  python3-sklearn                     # its bundled digits data trains the int8 accuracy check's CNN (tests/e2e/test_int8.py)
  prometheus                          # promtool: exposition-format and rule tests (tests/e2e/test_metrics.py, CTest prometheus_rules)
  chromium                            # headless, the status page's test (tests/e2e/test_dashboard.py)
  haproxy                             # the replicas behind a load balancer (tests/e2e/test_replicas.py)
)
# The Kubernetes manifests' schema check (deploy/kubernetes/validate) runs on Node.js; a machine
# with its own node and npm keeps them.
command -v npm >/dev/null || TEST_PACKAGES+=(nodejs npm)
[ "${1:-}" = "--build" ] || PACKAGES+=("${TEST_PACKAGES[@]}")
# Benchmarks only (`scripts/setup.sh --bench`): the load generators (wrk; h2load from
# nghttp2-client, which speaks HTTP/2 and so gRPC) and the reference server, Node.js for ONNX
# Runtime (npm onnxruntime-node, installed by bench/engine_bench.py).
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(nginx-light wrk nghttp2-client)
  PACKAGES+=(prometheus-cpp-dev libbenchmark-dev)  # bench/metrics: our registry against prometheus-cpp's
  PACKAGES+=(python3-matplotlib)  # bench/hpa_dry_run.py plots into docs/
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
