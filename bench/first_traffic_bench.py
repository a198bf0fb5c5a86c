#!/usr/bin/env python3
"""The first traffic after READY, and memory across batch sizes (issue 14's goals).

  /usr/bin/python3 bench/first_traffic_bench.py [--models DIR] [--concurrency 4] [--seconds 30]
                                                [--planned default,none]

resnet50 (models/make_real_models.py) served as the seed configures it: platform
onnxruntime_onnx, max_batch_size 32, dynamic_batching { preferred_batch_size [16, 32],
max_queue_delay_microseconds 2000 }. For each `planned_batch_sizes` setting (default: the powers
of two, preferred sizes and max prepared at load; none: each new batch size prepared by the
request that first needs it), from a fresh repository (no tuning cache):

  latency  time to READY; then wrk (closed loop, TF Serving REST, one image per request) for
           --seconds starting at READY, and again for --seconds: p50/p99 of each window, and the
           ratio first/steady p99 (goal <= 1.2).
  memory   a second server on the same repository: RSS at READY, after one request of batch 32,
           after requests of every batch size 1..32 (KServe binary); ratio all/32 (goal <= 1.3).

Needs `bash scripts/setup.sh --bench` (wrk) and `bash scripts/build.sh release`. Prints markdown
tables (the format docs/BENCHMARKS.md records) and the CPU flags.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from http_bench import INFERD, ROOT, free_port, wait_http, wrk

MAX_BATCH = 32


def cpu_flags():
    found = subprocess.run("grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u",
                           shell=True, capture_output=True, text=True).stdout.split()
    return " ".join(found) or "none of avx2/avx512"


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_repo(model_file, planned):
    repo = Path(tempfile.mkdtemp(prefix="inferd-first-traffic-"))
    (repo / "resnet50" / "1").mkdir(parents=True)
    (repo / "resnet50" / "1" / "model.onnx").symlink_to(model_file)
    config = ('platform: "onnxruntime_onnx"\nmax_batch_size: 32\n'
              "dynamic_batching { preferred_batch_size: [16, 32] max_queue_delay_microseconds: 2000 }\n")
    if planned != "default":
        config += f'parameters {{ key: "planned_batch_sizes" value: {{ string_value: "{planned}" }} }}\n'
    (repo / "resnet50" / "config.pbtxt").write_text(config)
    return repo


class Server:
    def __init__(self, repo):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="inferd-first-traffic-", suffix=".log", delete=False)
        start = time.time()
        self.proc = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
                                      "--http-port", str(self.port), "--metrics-port", str(free_port()),
                                      "--grpc-address", "127.0.0.1", "--grpc-port", str(free_port())],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_http(self.url + "/v2/health/ready", timeout=900)
        self.ready_seconds = time.time() - start

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def infer_binary(url, batch):
    """One KServe v2 request of `batch` images, tensors in binary."""
    import urllib.request
    x = np.random.default_rng(batch).random((batch, 3, 224, 224), dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    request = urllib.request.Request(url + "/v2/models/resnet50/infer", data=header + x.tobytes(), method="POST",
                                     headers={"Inference-Header-Content-Length": str(len(header)),
                                              "Content-Type": "application/octet-stream"})
    urllib.request.urlopen(request, timeout=120).read()


def latency(model_file, planned, args):
    repo = write_repo(model_file, planned)
    body = json.dumps({"instances": np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32).round(3).tolist()})
    server = Server(repo)
    url = server.url + "/v1/models/resnet50:predict"
    first = wrk(url, body, args.concurrency, args.seconds)
    steady = wrk(url, body, args.concurrency, args.seconds)
    server.stop()
    return repo, server.ready_seconds, first, steady


def memory(repo):
    server = Server(repo)  # the tuning cache from the latency run is there now
    at_ready = rss_mb(server.proc.pid)
    infer_binary(server.url, MAX_BATCH)
    after_max = rss_mb(server.proc.pid)
    for batch in range(1, MAX_BATCH + 1):
        infer_binary(server.url, batch)
    after_all = rss_mb(server.proc.pid)
    server.stop()
    return server.ready_seconds, at_ready, after_max, after_all


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="make_real_models.py output (made in a temp dir if absent)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--planned", default="default,none", help="planned_batch_sizes settings to compare")
    args = parser.parse_args()
    models = Path(args.models) if args.models else Path(tempfile.mkdtemp(prefix="inferd-models-"))
    model_file = models / "resnet50" / "model.onnx"
    if not model_file.exists():
        subprocess.run([sys.executable, str(ROOT / "models" / "make_real_models.py"), str(models), "--only", "resnet50"],
                       check=True, capture_output=True)

    print(f"CPU flags: {cpu_flags()}; resnet50, max_batch_size 32, preferred 16/32, delay 2 ms; "
          f"wrk -c {args.concurrency}, {args.seconds} s windows, TF Serving REST, one image per request\n")
    print("| planned_batch_sizes | READY after (fresh) s | first window req/s | p50 ms | p99 ms | steady req/s | p50 ms | "
          "p99 ms | p99 first/steady | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    memory_rows = []
    for planned in args.planned.split(","):
        repo, ready, first, steady = latency(model_file, planned, args)
        print(f"| {planned} | {ready:.1f} | {first['rps']:.1f} | {first['p50']:.0f} | {first['p99']:.0f} | "
              f"{steady['rps']:.1f} | {steady['p50']:.0f} | {steady['p99']:.0f} | {first['p99'] / steady['p99']:.2f} | "
              f"{first['errors'] + steady['errors']} |", flush=True)
        memory_rows.append((planned, *memory(repo)))
    print("\n| planned_batch_sizes | READY after (cached tuning) s | RSS at READY MB | after batch 32 MB | "
          "after 1..32 MB | all/32 |")
    print("|---|---:|---:|---:|---:|---:|")
    for planned, ready, at_ready, after_max, after_all in memory_rows:
        print(f"| {planned} | {ready:.1f} | {at_ready:.0f} | {after_max:.0f} | {after_all:.0f} | {after_all / after_max:.2f} |")


if __name__ == "__main__":
    main()
