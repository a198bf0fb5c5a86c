#!/usr/bin/env python3
"""Resident memory across load/unload cycles of one model (issue 15's goal: after 1000 cycles
within 10% of the RSS after the first).

  /usr/bin/python3 bench/load_cycles_bench.py [--models DIR] [--runs plus:1000,mobilenet_v3_large:30]

Each run starts `inferd serve --model-control-mode explicit` on a repository holding one model
(`plus`: y = x + 1, a one-node ONNX model; any other name: DIR/NAME/model.onnx from
models/make_real_models.py, served with max_batch_size 4 and dynamic batching, so every load
prepares its planned batch sizes), then loads and unloads it CYCLES times through the KServe
repository API and reads the server's VmRSS after each cycle. Prints a markdown table and the CPU
flags. Needs `bash scripts/build.sh release`.
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from first_traffic_bench import cpu_flags
from http_bench import INFERD, ROOT, free_port, wait_http

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from test_poll_mode import CONFIG as PLUS_CONFIG, plus_model  # noqa: E402

REAL_CONFIG = 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\ndynamic_batching { }\n'


def make_repository(root, name, models_dir):
    (root / name / "1").mkdir(parents=True)
    if name == "plus":
        (root / name / "config.pbtxt").write_text(PLUS_CONFIG)
        (root / name / "1" / "model.onnx").write_bytes(plus_model(1.0))
    else:
        (root / name / "config.pbtxt").write_text(REAL_CONFIG)
        (root / name / "1" / "model.onnx").write_bytes((models_dir / name / "model.onnx").read_bytes())


def resident_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cycle(name, cycles, models_dir):
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        make_repository(repo, name, models_dir)
        port = free_port()
        server = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--model-control-mode", "explicit",
                                   "--http-port", str(port), "--grpc-port", str(free_port()),
                                   "--metrics-port", str(free_port())],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/v2/health/live")
            rss, start = [], time.time()
            for _ in range(cycles):
                for action in ("load", "unload"):
                    response = requests.post(f"{url}/v2/repository/models/{name}/{action}", json={}, timeout=600)
                    response.raise_for_status()
                rss.append(resident_mb(server.pid))
            return rss, (time.time() - start) / cycles
        finally:
            server.terminate()
            server.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("/tmp/models"), help="make_real_models.py output")
    parser.add_argument("--runs", default="plus:1000,mobilenet_v3_large:30", help="NAME:CYCLES,...")
    args = parser.parse_args()
    print(f"CPU flags: {cpu_flags()}\n")
    print("| model | cycles | s per cycle | RSS after cycle 1 MB | after 2 | max | after the last | last/first |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run in args.runs.split(","):
        name, cycles = run.split(":")
        rss, per_cycle = cycle(name, int(cycles), args.models)
        second = rss[1] if len(rss) > 1 else rss[0]
        print(f"| {name} | {cycles} | {per_cycle:.2f} | {rss[0]:.1f} | {second:.1f} | {max(rss):.1f} | {rss[-1]:.1f} | "
              f"{rss[-1] / rss[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
