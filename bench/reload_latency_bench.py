#!/usr/bin/env python3
"""Model A's latency while models are reloaded (issue 15's goals: p99 of A while B reloads every
2 s within 1.2x of no reloads; while A itself is swapped every 10 s within 1.5x; no failed
request in either).

  /usr/bin/python3 bench/reload_latency_bench.py [--models DIR] [--a mobilenet_v3_large] [--b resnet50]
                                                 [--rate 40] [--seconds 20] [--rounds 5] [--load-threads 2]
                                                 [--b-batch 1] [--server-args '--model-load-priority normal']

One `inferd serve --model-control-mode explicit` holds A and B (ONNX, max_batch_size 1, from
models/make_real_models.py). `inferd bench -i grpc --request-rate RATE` (open loop, Poisson) sends
requests to A for --seconds in each scenario, in --rounds rounds (the order rotated each round):

  quiet       nothing else happens;
  B reloads   every 2 s, POST /v2/repository/models/B/load with a config override whose only change
              is a parameter, so each is a full reload (load, planned batch sizes, warmup) and a swap;
  A swaps     every 10 s, the same for A itself: the new A loads while the old one serves, then
              takes over and the old one drains.

Prints per scenario the median of its rounds' p50 and p99 (and each round's p99), errors and the
reloads done, the ratio of its median p99 to quiet's, and the CPU flags. Needs `bash scripts/build.sh release`.
"""
import argparse
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from first_traffic_bench import cpu_flags
from http_bench import INFERD, free_port, wait_http

CONFIG = {"platform": "onnxruntime_onnx", "max_batch_size": 1}


def reload_every(url, model, period, stop, done, max_batch_size):
    """Reloads `model` every `period` s until `stop`; counts successes and failures in `done`."""
    generation = 0
    while not stop.wait(period):
        generation += 1
        config = dict(CONFIG, max_batch_size=max_batch_size, parameters={"generation": {"string_value": str(generation)}})
        response = requests.post(f"{url}/v2/repository/models/{model}/load", timeout=300,
                                 json={"parameters": {"config": json.dumps(config)}})
        done["ok" if response.status_code == 200 else "failed"] += 1


def bench(grpc_target, model, rate, seconds):
    result = subprocess.run([INFERD, "bench", "-u", grpc_target, "-i", "grpc", "-m", model, "--request-rate", str(rate),
                             "--duration", str(seconds), "--warmup-ms", "2000", "--format", "json"],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("/tmp/models"))
    parser.add_argument("--a", default="mobilenet_v3_large")
    parser.add_argument("--b", default="resnet50")
    parser.add_argument("--rate", type=float, default=40)
    parser.add_argument("--seconds", type=float, default=20, help="per scenario and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load-threads", type=int, default=2)
    parser.add_argument("--b-batch", type=int, default=1,
                        help="B's max_batch_size: a reload prepares every batch size up to 8 (more work per reload)")
    parser.add_argument("--server-args", default="", help="more `inferd serve` flags, e.g. '--model-load-priority normal'")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for name in ("A", "B"):
            source = args.a if name == "A" else args.b
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "1" / "model.onnx").write_bytes((args.models / source / "model.onnx").read_bytes())
            batch = args.b_batch if name == "B" else 1
            (repo / name / "config.pbtxt").write_text(f'platform: "onnxruntime_onnx"\nmax_batch_size: {batch}\n')
        port, grpc_port = free_port(), free_port()
        server = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--model-control-mode", "explicit",
                                   "--load-model", "A", "--load-model", "B", "--http-port", str(port),
                                   "--grpc-port", str(grpc_port), "--metrics-port", str(free_port()),
                                   "--model-load-threads", str(args.load_threads), *args.server_args.split()],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        scenarios = (("quiet", None, 0), ("B reloads every 2 s", "B", 2), ("A swaps every 10 s", "A", 10))
        runs = {name: [] for name, _, _ in scenarios}
        try:
            wait_http(url + "/v2/health/ready", timeout=600)
            # The machine's own noise moves A's p99 by 2x between minutes, more than a reload does:
            # the scenarios alternate in short windows, in an order rotated every round, and each
            # is judged by the median of its rounds' p99s.
            for round_index in range(args.rounds):
                order = scenarios[round_index % 3:] + scenarios[:round_index % 3]
                for scenario, model, period in order:
                    stop, done = threading.Event(), {"ok": 0, "failed": 0}
                    reloader = None
                    if model:
                        batch = args.b_batch if model == "B" else 1
                        reloader = threading.Thread(target=reload_every, args=(url, model, period, stop, done, batch))
                        reloader.start()
                    try:
                        result = bench(f"127.0.0.1:{grpc_port}", "A", args.rate, args.seconds)
                    finally:
                        stop.set()
                        if reloader:
                            reloader.join()
                    runs[scenario].append((result, done))
        finally:
            server.terminate()
            server.wait(timeout=120)

    def median(values):
        values = sorted(values)
        middle = len(values) // 2
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2

    quiet_p99 = median(r["p99_ms"] for r, _ in runs["quiet"])
    print(f"CPU flags: {cpu_flags()}")
    print(f"\nA = {args.a} and B = {args.b}, batch 1, gRPC open loop at {args.rate:g} req/s on A, {args.rounds} rounds of "
          f"{args.seconds:g} s per scenario (order rotated each round), B max_batch_size {args.b_batch}, "
          f"--model-load-threads {args.load_threads} {args.server_args}\n")
    print("| scenario | A p50 ms (median) | A p99 ms (median) | p99 of each round | median p99 / quiet's | "
          "A requests | A errors | reloads (failed) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for scenario, _, _ in scenarios:
        results = runs[scenario]
        p99s = [r["p99_ms"] for r, _ in results]
        print(f"| {scenario} | {median(r['p50_ms'] for r, _ in results):.2f} | {median(p99s):.2f} | "
              f"{', '.join(f'{p:.0f}' for p in p99s)} | {median(p99s) / quiet_p99:.2f} | "
              f"{sum(r['requests'] for r, _ in results)} | {sum(r['errors'] for r, _ in results)} | "
              f"{sum(d['ok'] for _, d in results)} ({sum(d['failed'] for _, d in results)}) |")

if __name__ == "__main__":
    main()
