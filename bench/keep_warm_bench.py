#!/usr/bin/env python3
"""The first request after a quiet spell, with and without keep-warm (issue 15).

  /usr/bin/python3 bench/keep_warm_bench.py [--models DIR] [--model mobilenet_v3_large] [--idle 30] [--rounds 4]

One server holds the same ONNX model twice: `warm` with keep_warm_interval_seconds 5 and `cold`
without. Each round leaves both idle for --idle seconds, then sends one request to each (the order
alternates between rounds) and reads its server-side time from the model's statistics (the
success duration's increase: queue + compute, no client or network time). Steady state is the
median of 20 back-to-back requests. Prints a markdown table and the CPU flags. Needs
`bash scripts/build.sh release` and the real models (models/make_real_models.py).
"""
import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import requests

from first_traffic_bench import cpu_flags
from http_bench import INFERD, free_port, wait_http

CONFIG = 'platform: "onnxruntime_onnx"\nmax_batch_size: 1\n'
KEEP_WARM = 'parameters { key: "keep_warm_interval_seconds" value: { string_value: "5" } }\n'


def server_ms(session, url, model, body):
    def success_ns():
        stats = session.get(f"{url}/v2/models/{model}/stats", timeout=10).json()["model_stats"][0]
        return stats["inference_stats"]["success"]["ns"]
    before = success_ns()
    session.post(f"{url}/v2/models/{model}/infer", json=body, timeout=60).raise_for_status()
    return (success_ns() - before) / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("/tmp/models"))
    parser.add_argument("--model", default="mobilenet_v3_large")
    parser.add_argument("--idle", type=float, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    onnx = (args.models / args.model / "model.onnx").read_bytes()
    sample = np.load(args.models / args.model / "input.npy")[:1]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for name, extra in (("warm", KEEP_WARM), ("cold", "")):
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "1" / "model.onnx").write_bytes(onnx)
            (repo / name / "config.pbtxt").write_text(CONFIG + extra)
        port = free_port()
        server = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--http-port", str(port),
                                   "--grpc-port", str(free_port()), "--metrics-port", str(free_port())],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/v2/health/ready", timeout=600)
            session = requests.Session()
            input_name = session.get(f"{url}/v2/models/warm", timeout=10).json()["inputs"][0]["name"]
            body = {"inputs": [{"name": input_name, "shape": list(sample.shape), "datatype": "FP32",
                                "data": sample.ravel().tolist()}]}
            steady = {}
            for model in ("warm", "cold"):
                for _ in range(5):
                    server_ms(session, url, model, body)
                steady[model] = statistics.median(server_ms(session, url, model, body) for _ in range(20))
            first = {"warm": [], "cold": []}
            for round_index in range(args.rounds):
                time.sleep(args.idle)
                order = ("warm", "cold") if round_index % 2 == 0 else ("cold", "warm")
                for model in order:
                    first[model].append(server_ms(session, url, model, body))
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(f"CPU flags: {cpu_flags()}")
    print(f"\n{args.model}, batch 1, server-side ms; first request after {args.idle:g} s idle, {args.rounds} rounds\n")
    print("| model | steady median | first after idle (median) | first / steady | each round |")
    print("|---|---:|---:|---:|---|")
    for model, label in (("warm", "keep_warm_interval_seconds 5"), ("cold", "no keep-warm")):
        median = statistics.median(first[model])
        print(f"| {label} | {steady[model]:.2f} | {median:.2f} | {median / steady[model]:.2f} | "
              f"{', '.join(f'{v:.1f}' for v in first[model])} |")


if __name__ == "__main__":
    main()
