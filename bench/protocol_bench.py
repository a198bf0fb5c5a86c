#!/usr/bin/env python3
"""gRPC vs HTTP/JSON vs HTTP/binary, on the identity model, with inferd's own load generator.

  bench/protocol_bench.py [--rounds 3] [--seconds 3]

For a 1x3x224x224 FP32 tensor (602 KB, an image) and a 1x16 FP32 tensor (64 B), at concurrency 1
and 16, runs `inferd bench` (closed loop, one fixed window per run after a warm-up) over each
protocol (gRPC twice: a thread per request in flight, and `--async`) against a fresh `inferd serve` and prints requests/s and p99 (median over rounds) with the
ratios the issue asks about. Load generator and server share the machine: on 2 cores the client's
own encoding (JSON especially) is part of what is measured, as it is for any real client.
Needs `bash scripts/build.sh release`.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERD = os.environ.get("INFERD_BIN", str(ROOT / "build" / "src" / "server" / "inferd"))

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
             "http-json": ["-i", "http", "--json-tensors"]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(repo):
    http, grpc = free_port(), free_port()
    process = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
                                "--http-port", str(http), "--grpc-address", "127.0.0.1", "--grpc-port", str(grpc),
                                "--metrics-port", str(free_port())],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=1)
            return process, http, grpc
        except Exception:
            time.sleep(0.05)
    raise RuntimeError("inferd did not come up")


def bench(model, protocol, concurrency, ports, seconds):
    http, grpc = ports
    url = f"127.0.0.1:{grpc if protocol.startswith('grpc') else http}"
    result = subprocess.run([INFERD, "bench", "-m", model, "-u", url, *PROTOCOLS[protocol],
                             "--concurrency", str(concurrency), "--duration", str(seconds), "--warmup-ms", "500",
                             "--format", "json"], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    row = json.loads(result.stdout)[0]
    if row["errors"]:
        raise RuntimeError(f"{model} {protocol} c={concurrency}: {row['errors']} errors")
    return row["throughput"], row["p99_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for name, config in MODELS.items():
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "config.pbtxt").write_text(config)
        process, http, grpc = start_server(repo)
        try:
            results = {}
            for _ in range(args.rounds):  # rounds interleave protocols, so drift hits all alike
                for model in MODELS:
                    for concurrency in (1, 16):
                        for protocol in PROTOCOLS:
                            key = (model, concurrency, protocol)
                            results.setdefault(key, []).append(bench(model, protocol, concurrency, (http, grpc),
                                                                     args.seconds))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    print(f"| tensor | concurrency | protocol | req/s | p99 ms | req/s vs HTTP/JSON | req/s vs HTTP/binary |")
    print("|---|---|---|---|---|---|---|")
    for model in MODELS:
        tensor = "1x3x224x224 FP32 (602 KB)" if model == "identity_image" else "1x16 FP32 (64 B)"
        for concurrency in (1, 16):
            median = {p: (statistics.median(r[0] for r in results[(model, concurrency, p)]),
                          statistics.median(r[1] for r in results[(model, concurrency, p)])) for p in PROTOCOLS}
            for protocol in PROTOCOLS:
                rate, p99 = median[protocol]
                print(f"| {tensor} | {concurrency} | {protocol} | {rate:.0f} | {p99:.2f} | "
                      f"{rate / median['http-json'][0]:.2f}x | {rate / median['http-binary'][0]:.2f}x |")


if __name__ == "__main__":
    main()
