#!/usr/bin/env python3
"""gRPC vs HTTP/JSON vs HTTP/binary, on the identity model, with inferd's own load generator.

  bench/protocol_bench.py [--rounds 3] [--seconds 3] [--concurrency 1,16] [--models image,small]
                          [--protocols grpc,http-binary,shm-grpc,...]

For a 1x3x224x224 FP32 tensor (602 KB, an image) and a 1x16 FP32 tensor (64 B), at concurrency 1
and 16, runs `inferd bench` (closed loop, one fixed window per run after a warm-up) over each
protocol (gRPC twice: a thread per request in flight, and `--async`) against a fresh `inferd serve`
and prints requests/s and p99 (median over rounds) with the ratios the issue asks about.
`shm-grpc` and `shm-http` pass the tensors through Triton's system shared memory (`inferd bench
--shared-memory system`: the input written once into a registered region, the output written by
the server into it), so only the request's metadata crosses the socket. Load
generator and server share the machine: on 2 cores the client's own encoding (JSON especially) is
part of what is measured, as it is for any real client.

Two references put the gRPC numbers in proportion:
- `grpc-floor`: `build/bench/grpc_floor_server`, a gRPC C++ server with the same service and
  completion-queue API that answers ModelInfer inline on its one poller (no queue, no instance
  thread), driven by the same `inferd bench -i grpc --async`, small tensor only: gRPC's own cost.
- a lean-client table (when h2load is installed, `scripts/setup.sh --bench`): h2load, one C
  client for both protocols (HTTP/2 with gRPC framing, and HTTP/1.1), so that the gRPC++
  client's own cost is out of the numbers; small tensor, concurrency 16.
Needs `bash scripts/build.sh release`.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERD = os.environ.get("INFERD_BIN", str(ROOT / "build" / "src" / "server" / "inferd"))
GRPC_FLOOR = os.environ.get("GRPC_FLOOR_BIN", str(ROOT / "build" / "bench" / "grpc_floor_server"))

MODELS = {
    "identity_image": 'backend: "identity"\nmax_batch_size: 0\n'
                      'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1, 3, 224, 224 ] } ]\n'
                      'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1, 3, 224, 224 ] } ]\n',
    "identity_small": 'backend: "identity"\nmax_batch_size: 0\n'
                      'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 1, 16 ] } ]\n'
                      'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1, 16 ] } ]\n',
}
# grpc-async: the closed loop as chains of async calls (`inferd bench --async`), which saves the
# gRPC client a thread wake-up per request; HTTP's async path is a thread pool, so its threads stay.
PROTOCOLS = {"grpc": ["-i", "grpc"], "grpc-async": ["-i", "grpc", "--async"], "http-binary": ["-i", "http"],
             "http-json": ["-i", "http", "--json-tensors"], "grpc-floor": ["-i", "grpc", "--async"],
             "shm-grpc": ["-i", "grpc", "--shared-memory", "system"],
             "shm-http": ["-i", "http", "--shared-memory", "system"]}
SMALL_VALUES = [0.5 + i for i in range(16)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(ready, what):
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if ready():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up")


def start_server(repo):
    http, grpc = free_port(), free_port()
    process = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
                                "--http-port", str(http), "--grpc-address", "127.0.0.1", "--grpc-port", str(grpc),
                                "--metrics-port", str(free_port()), "--allow-client-shm", "true"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=1), "inferd")
    return process, http, grpc


def start_grpc_floor():
    port = free_port()
    process = subprocess.Popen([GRPC_FLOOR, f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, "grpc_floor_server")
    return process, port


def bench(model, protocol, concurrency, ports, seconds):
    http, grpc, floor = ports
    url = f"127.0.0.1:{floor if protocol == 'grpc-floor' else grpc if 'grpc' in protocol else http}"
    result = subprocess.run([INFERD, "bench", "-m", model, "-u", url, *PROTOCOLS[protocol],
                             "--concurrency", str(concurrency), "--duration", str(seconds), "--warmup-ms", "500",
                             "--format", "json"], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    row = json.loads(result.stdout)[0]
    if row["errors"]:
        raise RuntimeError(f"{model} {protocol} c={concurrency}: {row['errors']} errors")
    return row["throughput"], row["p99_ms"]


def protobuf_field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def varint(value):
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def small_grpc_request():
    """ModelInferRequest for identity_small, gRPC-framed (field numbers of grpc_service.proto)."""
    tensor = (protobuf_field(1, b"INPUT0") + protobuf_field(2, b"FP32") +
              protobuf_field(3, varint(1) + varint(16)))  # shape, packed
    message = (protobuf_field(1, b"identity_small") + protobuf_field(5, tensor) +
               protobuf_field(7, struct.pack("<16f", *SMALL_VALUES)))
    return b"\0" + struct.pack(">I", len(message)) + message


def small_binary_http_request():
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 64}}]}).encode()
    return header + struct.pack("<16f", *SMALL_VALUES), len(header)


def h2load(args, body, seconds):
    with tempfile.NamedTemporaryFile(suffix=".bin") as file:
        file.write(body)
        file.flush()
        out = subprocess.run(["h2load", "-D", f"{int(seconds * 1000)}ms", "--warm-up-time", "500ms", "-t", "1",
                              "-d", file.name, *args],
                             capture_output=True, text=True, timeout=seconds + 60).stdout
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not done or done.group(1) != done.group(2):
        raise RuntimeError("h2load: requests failed\n" + out)
    return float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1)), int(done.group(2))


def inference_count(http):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/identity_small/stats", timeout=5) as answer:
        return json.load(answer)["model_stats"][0]["inference_count"]


def lean_client_round(ports, seconds):
    """Small tensor, concurrency 16, h2load for every protocol. gRPC answers 200 even on error (the
    status is a trailer), so inferd's own count must grow by what h2load counted."""
    http, grpc, floor = ports
    grpc_args = ["-c", "1", "-m", "16", "-H", "content-type: application/grpc", "-H", "te: trailers"]
    rates = {}
    before = inference_count(http)
    rates["grpc"], sent = h2load(grpc_args + [f"http://127.0.0.1:{grpc}/inference.GRPCInferenceService/ModelInfer"],
                                 small_grpc_request(), seconds)
    if inference_count(http) - before < sent:
        raise RuntimeError("h2load's gRPC requests did not all reach the model")
    rates["grpc-floor"], _ = h2load(grpc_args + [f"http://127.0.0.1:{floor}/inference.GRPCInferenceService/ModelInfer"],
                                    small_grpc_request(), seconds)
    body, json_length = small_binary_http_request()
    rates["http-binary"], _ = h2load(["--h1", "-c", "16", "-H", "Content-Type: application/octet-stream",
                                      "-H", f"Inference-Header-Content-Length: {json_length}",
                                      f"http://127.0.0.1:{http}/v2/models/identity_small/infer"], body, seconds)
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--concurrency", default="1,16", help="comma-separated levels")
    parser.add_argument("--models", default="image,small", help="image and/or small")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated, of " + ", ".join(PROTOCOLS))
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    models = [f"identity_{name}" for name in args.models.split(",")]
    chosen = args.protocols.split(",")
    unknown = [p for p in chosen if p not in PROTOCOLS] + [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    lean = shutil.which("h2load") is not None and "identity_small" in models and "grpc-floor" in chosen
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for name, config in MODELS.items():
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "config.pbtxt").write_text(config)
        process, http, grpc = start_server(repo)
        floor_process, floor = start_grpc_floor()
        ports = (http, grpc, floor)
        try:
            results, lean_results = {}, []
            for _ in range(args.rounds):  # rounds interleave protocols, so drift hits all alike
                for model in models:
                    for concurrency in levels:
                        for protocol in protocols_for(model, chosen):
                            key = (model, concurrency, protocol)
                            results.setdefault(key, []).append(bench(model, protocol, concurrency, ports, args.seconds))
                if lean:
                    lean_results.append(lean_client_round(ports, args.seconds))
        finally:
            for running in (process, floor_process):
                running.send_signal(signal.SIGTERM)
                running.wait(timeout=30)
    print_inferd_bench_table(results, models, levels, chosen)
    if lean:
        print_lean_client_table(lean_results)
    else:
        print("\n(h2load not installed: no lean-client table; `bash scripts/setup.sh --bench` installs it)")


def protocols_for(model, chosen):
    # The floor server's metadata describes the small tensor only.
    return [p for p in chosen if p != "grpc-floor" or model == "identity_small"]


def print_inferd_bench_table(results, models, levels, chosen):
    print("Load generator: `inferd bench` (closed loop); grpc-floor is build/bench/grpc_floor_server.\n")
    baselines = [p for p in ("http-json", "http-binary") if p in chosen]
    print("| tensor | concurrency | protocol | req/s | p99 ms |" + "".join(f" req/s vs {b} |" for b in baselines))
    print("|---|---|---|---|---|" + "---|" * len(baselines))
    for model in models:
        tensor = "1x3x224x224 FP32 (602 KB)" if model == "identity_image" else "1x16 FP32 (64 B)"
        for concurrency in levels:
            protocols = protocols_for(model, chosen)
            median = {p: (statistics.median(r[0] for r in results[(model, concurrency, p)]),
                          statistics.median(r[1] for r in results[(model, concurrency, p)])) for p in protocols}
            for protocol in protocols:
                rate, p99 = median[protocol]
                ratios = "".join(f" {rate / median[b][0]:.2f}x |" for b in baselines)
                print(f"| {tensor} | {concurrency} | {protocol} | {rate:.0f} | {p99:.2f} |{ratios}")


def print_lean_client_table(rounds):
    print("\nLoad generator: h2load (gRPC: one connection, 16 streams; HTTP/1.1: 16 connections); "
          "1x16 FP32, concurrency 16, median of the rounds\n")
    print("| server | req/s | vs inferd HTTP/binary |")
    print("|---|---|---|")
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    labels = {"http-binary": "inferd, HTTP/binary", "grpc": "inferd, gRPC", "grpc-floor": "grpc_floor_server (gRPC)"}
    for key in ("http-binary", "grpc", "grpc-floor"):
        print(f"| {labels[key]} | {median[key]:.0f} | {median[key] / median['http-binary']:.2f}x |")


if __name__ == "__main__":
    main()
