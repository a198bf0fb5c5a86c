#!/usr/bin/env python3
"""Router benchmarks (issue 17). Each prints a markdown table with the CPU flags; docs/BENCHMARKS.md
records them.

  bench/router_bench.py overhead    a router with one rule to a local identity model against calling
      that model directly: p50 and p99 from `inferd bench` at concurrency 1, interleaved rounds.
      Goal: <= 50 us p50 added.
  bench/router_bench.py cascade     examples/cascade (digits: small linear -> large MLP): per
      threshold, the fraction escalated, accuracy against the labels and the server's CPU time per
      request, next to always-small and always-large. Goal: a threshold within 0.5 points of the
      large model's accuracy at <= 50% of its cost.
  bench/router_bench.py three-tier  the seeds' device -> edge server -> cloud chain
      (examples/cascade/three_tier.py: mobilenet_v3_large -> efficientnet_b0 -> swin_t), as a
      cascade and as the split by complexity (byte entropy): where flat, gradient and noise
      images go, and their latency.
  bench/router_bench.py forecast    replays reproducible traces (a diurnal curve with bursts, a step
      change) against a server, open loop, and compares inferd_predicted_requests_per_second (read
      every second) with the rate that came 10 s later: 1 - MAPE, with Holt and with Holt-Winters.
  bench/router_bench.py edge-cloud  two processes: an edge inferd whose local model saturates at
      --capacity req/s, and a cloud inferd as its remote pool. A rising load through the edge's router, routing on the
      local queue depth only against routing on the predicted load as well: p99 and throughput.

Needs `bash scripts/setup.sh --bench` and `bash scripts/build.sh release`.
"""
import argparse
import http.client
import json
import math
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from first_traffic_bench import cpu_flags  # noqa: E402
from http_bench import INFERD, ROOT, Inferd  # noqa: E402

IDENTITY = """backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
"""


def router(name, parameters):
    lines = [f'name: "{name}"', 'platform: "router"', "max_batch_size: 8",
             'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]',
             'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]']
    lines += [f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in parameters.items()]
    return "\n".join(lines) + "\n"


def write_models(root, models):
    root = Path(root)
    for name, config in models.items():
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(config)
    return root


def metrics_port(server):
    args = server.proc.args
    return int(args[args.index("--metrics-port") + 1])


def metric(server, name, **labels):
    text = urlopen(f"http://127.0.0.1:{metrics_port(server)}/metrics")
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def urlopen(url):
    import urllib.request
    return urllib.request.urlopen(url, timeout=5).read().decode()


# --- overhead -----------------------------------------------------------------------------------
def inferd_bench(port, model, seconds):
    out = subprocess.run([INFERD, "bench", "-u", f"127.0.0.1:{port}", "-m", model, "--concurrency", "1",
                          "--shape", "INPUT0:16", "--duration", str(seconds), "--warmup-ms", "500", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    level = json.loads(out)
    level = level[0] if isinstance(level, list) else level
    return level


def overhead(args):
    root = write_models(tempfile.mkdtemp(prefix="router-bench-"), {
        "direct": IDENTITY, "routed": router("routed", {"route.1": "param.tier == 'gold' -> model direct",
                                                        "route.default": "model direct"})})
    server = Inferd(root)
    rows = {"direct": [], "routed": []}
    try:
        for _ in range(args.rounds):
            for model in ("direct", "routed"):
                rows[model].append(inferd_bench(server.port, model, args.seconds))
    finally:
        server.stop()
    print(f"CPU flags: {cpu_flags()}\n")
    print("| target | p50 us | p99 us | throughput req/s |")
    print("|---|---:|---:|---:|")
    p50 = {}
    for model, levels in rows.items():
        p50[model] = float(np.median([level["p50_ms"] * 1000 for level in levels]))
        p99 = float(np.median([level["p99_ms"] * 1000 for level in levels]))
        rps = float(np.median([level["throughput"] for level in levels]))
        print(f"| {model} | {p50[model]:.0f} | {p99:.0f} | {rps:.0f} |")
    print(f"\nrouter overhead at p50: {p50['routed'] - p50['direct']:.0f} us (median of {args.rounds} interleaved rounds)")


# --- cascade ------------------------------------------------------------------------------------
def post_json(conn, model, body):
    conn.request("POST", f"/v2/models/{model}/infer", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"{model}: {response.status} {data}")
    return data


def cascade(args):
    out = Path(args.cascade_dir)
    if not (out / "repository").exists():
        subprocess.run([sys.executable, str(ROOT / "examples" / "cascade" / "make_repository.py"), str(out)], check=True)
    x, y = np.load(out / "test_x.npy"), np.load(out / "test_y.npy")
    thresholds = sorted(p.name for p in (out / "repository").iterdir() if p.name.startswith("cascade_"))
    server = Inferd(out / "repository")
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    results = []
    try:
        for model in ["small", "large", *thresholds]:
            correct = escalated = 0
            cpu_before, start = server.cpu_seconds(), time.perf_counter()
            for pixels, label in zip(x, y):
                answer = post_json(conn, model, {"inputs": [{"name": "PIXELS", "shape": [1, 64], "datatype": "FP32",
                                                             "data": pixels.tolist()}]})
                correct += int(np.argmax(answer["outputs"][0]["data"]) == label)
                escalated += int(answer.get("parameters", {}).get("tier", 1) > 1)
            cpu = (server.cpu_seconds() - cpu_before) / len(x)
            wall = (time.perf_counter() - start) / len(x)
            results.append((model, escalated / len(x), correct / len(x), cpu, wall))
    finally:
        server.stop()
    large_cpu = next(r[3] for r in results if r[0] == "large")
    print(f"CPU flags: {cpu_flags()}; {len(x)} held-out digits, one request each, HTTP JSON\n")
    print("| model | threshold | escalated | accuracy | server CPU us/request | vs large | mean latency us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model, fraction, accuracy, cpu, wall in results:
        threshold = f"{int(model.split('_')[1]) / 100:.2f}" if model.startswith("cascade_") else "-"
        print(f"| {model} | {threshold} | {fraction:.1%} | {accuracy:.2%} | {cpu * 1e6:.0f} | {cpu / large_cpu:.0%} | "
              f"{wall * 1e6:.0f} |")


# --- the seeds' three tiers ---------------------------------------------------------------------
def images(kind, count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        if kind == "flat":  # one colour: a handful of distinct bytes
            yield np.full((1, 3, 224, 224), rng.uniform(-1, 1), np.float32)
        elif kind == "gradient":  # 64 grey levels across the image
            ramp = np.repeat(np.linspace(-1, 1, 64, dtype=np.float32), 4)[:224]
            yield np.broadcast_to(ramp[None, None, None, :], (1, 3, 224, 224)).copy() + np.float32(rng.uniform(0, 0.01))
        else:  # noise
            yield rng.standard_normal((1, 3, 224, 224), dtype=np.float32)


def infer_binary(conn, model, array):
    head = json.dumps({"inputs": [{"name": "input", "shape": list(array.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": array.nbytes}}],
                       "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    conn.request("POST", f"/v2/models/{model}/infer", body=head + array.tobytes(),
                 headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/octet-stream"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"{model}: {response.status} {body[:300]!r}")
    return json.loads(body[:int(response.getheader("Inference-Header-Content-Length"))])


def three_tier(args):
    out = Path(args.dir)
    if not (out / "repository").exists():
        subprocess.run([sys.executable, str(ROOT / "examples" / "cascade" / "three_tier.py"), str(out),
                        "--thresholds", args.thresholds], check=True)
    server = Inferd(out / "repository")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    rows = []
    try:
        for router_name in ("by_complexity", "three_tier"):
            for kind in ("flat", "gradient", "noise"):
                where, took = {}, []
                for image in images(kind, args.count, seed=3):
                    start = time.perf_counter()
                    answer = infer_binary(conn, router_name, image)
                    took.append(time.perf_counter() - start)
                    target = answer["parameters"]["routed_to"]
                    where[target] = where.get(target, 0) + 1
                rows.append((router_name, kind, where, float(np.median(took)) * 1e3))
    finally:
        server.stop()
    print(f"CPU flags: {cpu_flags()}; {args.count} images of each kind, batch 1, HTTP binary tensors; random "
          f"weights: the cascade's confidences say nothing about the images (thresholds {args.thresholds})\n")
    print("| router | input | routed to | p50 ms |")
    print("|---|---|---|---:|")
    for router_name, kind, where, p50 in rows:
        spread = ", ".join(f"{target} {count}" for target, count in sorted(where.items()))
        print(f"| {router_name} | {kind} | {spread} | {p50:.1f} |")


# --- forecast -----------------------------------------------------------------------------------
def trace(kind, seconds, seed):
    """Requests per second for each second of the trace, reproducible from the seed."""
    rng = random.Random(seed)
    rates = []
    for t in range(seconds):
        if kind == "diurnal":  # a 'day' of 60 s between 40 and 160 req/s, plus 3 s bursts
            rate = 100 + 60 * math.sin(2 * math.pi * t / 60)
            if t % 37 in (0, 1, 2):
                rate *= 1.6
        elif kind == "step":  # 60 req/s, then 150 from second 60 on
            rate = 60 if t < 60 else 150
        else:  # ramp: 20 -> 200 req/s
            rate = 20 + 180 * t / seconds
        rates.append(max(1.0, rate * (1 + rng.uniform(-0.05, 0.05))))
    return rates


def replay(server, model, rates, seed, sample):
    """Open loop: Poisson arrivals at each second's rate; `sample(t)` runs at each second's start."""
    rng = random.Random(seed)
    sent = [0]
    lock = threading.Lock()
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})

    def worker(queue):
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        while True:
            item = queue.get()
            if item is None:
                return
            conn.request("POST", f"/v2/models/{model}/infer", body=body, headers={"Content-Type": "application/json"})
            conn.getresponse().read()
            with lock:
                sent[0] += 1

    import queue as queue_module
    work = queue_module.Queue()
    threads = [threading.Thread(target=worker, args=(work,), daemon=True) for _ in range(32)]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    for t, rate in enumerate(rates):
        second_start = start + t
        sample(t)
        arrival = second_start
        while True:
            arrival += rng.expovariate(rate)
            if arrival >= second_start + 1:
                break
            time.sleep(max(0.0, arrival - time.monotonic()))
            work.put(1)
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()


def forecast(args):
    horizon = 10
    print(f"CPU flags: {cpu_flags()}; horizon {horizon} s, per-second counts, open-loop Poisson replay\n")
    print("| trace | method | seconds scored | 1 - MAPE | last second's count: 1 - MAPE |")
    print("|---|---|---:|---:|---:|")
    for kind in args.traces.split(","):
        rates = trace(kind, args.seconds, seed=17)
        for method, extra in (("Holt", []), ("Holt-Winters, period 60 s", ["--prediction-period-secs", "60"])):
            if kind != "diurnal" and method != "Holt":
                continue
            root = write_models(tempfile.mkdtemp(prefix="forecast-"), {"m": IDENTITY})
            server = Inferd(root, extra=["--prediction-horizon-secs", str(horizon), *extra])
            predicted, totals = {}, {}

            def sample(t):
                predicted[t] = metric(server, "inferd_predicted_requests_per_second", model="m", horizon=horizon)
                totals[t] = metric(server, "inferd_requests_total", model="m", outcome="success") or 0

            try:
                replay(server, "m", rates, seed=23, sample=sample)
            finally:
                server.stop()
            # The rate that came: requests answered in second t (from the server's own counter).
            # Scored from second 65 on, once Holt-Winters has seen its first 60 s period.
            actual = {t: totals[t + 1] - totals[t] for t in range(len(rates) - 1)}
            scored = [t for t in range(65, len(rates) - horizon - 1)
                      if predicted.get(t) is not None and actual.get(t + horizon, 0) > 0]
            mape = np.mean([abs(predicted[t] - actual[t + horizon]) / actual[t + horizon] for t in scored])
            # The baseline: the last second's count as the forecast.
            naive = np.mean([abs(actual[t - 1] - actual[t + horizon]) / actual[t + horizon] for t in scored])
            print(f"| {kind} | {method} | {len(scored)} | {1 - mape:.1%} | {1 - naive:.1%} |", flush=True)


# --- edge/cloud ---------------------------------------------------------------------------------
def edge_cloud(args):
    # Both processes and the load generator share this machine: the edge's model burns one core at
    # saturation (5 ms a request, one instance: 200 req/s), the cloud's is 5x cheaper (a faster
    # machine) on 2 instances, so overflow to it stays within the cores left.
    local = IDENTITY + 'parameters { key: "cost" value: { string_value: "fixed_us=5000" } }\n'
    cloud_model = IDENTITY.replace("max_batch_size: 8", "max_batch_size: 8\ninstance_group [ { count: 2 } ]") + \
        'parameters { key: "cost" value: { string_value: "fixed_us=1000" } }\n'
    cloud = Inferd(write_models(tempfile.mkdtemp(prefix="cloud-"), {"cloud_model": cloud_model}))
    cloud_grpc = int(cloud.proc.args[cloud.proc.args.index("--grpc-port") + 1])
    pool = {"pool.cloud": f"grpc://127.0.0.1:{cloud_grpc}", "pool_options.cloud": "model=cloud_model"}
    policies = {
        "queue_only": {"route.1": "queue_depth(model local) > 4 -> pool cloud", "route.default": "model local"},
        # The local model's own rate cannot pass its capacity (overflow goes elsewhere), and a router
        # may not name itself: near capacity in 10 s, any queue at all overflows.
        "predicted": {"route.1": f"queue_depth(model local) > 4 or (predicted_rps(model local) > {0.9 * args.capacity:g}"
                                 " and queue_depth(model local) > 0) -> pool cloud",
                      "route.default": "model local"},
    }
    print(f"CPU flags: {cpu_flags()}; edge model 5 ms/request on 1 instance (~{args.capacity} req/s), cloud model "
          f"1 ms on 2 instances; open-loop Poisson load ramping 50 -> {args.peak} req/s over {args.seconds} s\n")
    print("| routing | requests | throughput req/s | p50 ms | p99 ms | to cloud |")
    print("|---|---:|---:|---:|---:|---:|")
    try:
        for name, rules in policies.items():
            root = write_models(tempfile.mkdtemp(prefix="edge-"), {"local": local, name: router(name, {**rules, **pool})})
            edge = Inferd(root, extra=["--prediction-horizon-secs", "5"])
            latencies, lock = [], threading.Lock()
            body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
            rates = [50 + (args.peak - 50) * t / args.seconds for t in range(args.seconds)]
            import queue as queue_module
            work = queue_module.Queue()

            def worker():
                conn = http.client.HTTPConnection("127.0.0.1", edge.port)
                while (arrival := work.get()) is not None:
                    conn.request("POST", f"/v2/models/{name}/infer", body=body, headers={"Content-Type": "application/json"})
                    conn.getresponse().read()
                    with lock:
                        latencies.append(time.monotonic() - arrival)

            threads = [threading.Thread(target=worker, daemon=True) for _ in range(64)]
            for thread in threads:
                thread.start()
            rng, start = random.Random(5), time.monotonic()
            for t, rate in enumerate(rates):
                arrival = start + t
                while (arrival := arrival + rng.expovariate(rate)) < start + t + 1:
                    time.sleep(max(0.0, arrival - time.monotonic()))
                    work.put(arrival)
            for _ in threads:
                work.put(None)
            for thread in threads:
                thread.join()
            took = time.monotonic() - start
            stats = json.loads(urlopen(f"{edge.url}/v2/models/{name}/stats"))["model_stats"][0]
            cloud_share = {t["target"]: t["requests"] for t in stats["router_targets"]}.get("pool cloud", 0)
            edge.stop()
            lat = np.array(latencies) * 1e3
            print(f"| {name} | {len(lat)} | {len(lat) / took:.0f} | {np.percentile(lat, 50):.1f} | "
                  f"{np.percentile(lat, 99):.1f} | {cloud_share / len(lat):.0%} |")
    finally:
        cloud.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=4)
    p = sub.add_parser("cascade")
    p.add_argument("--cascade-dir", default=str(Path(tempfile.gettempdir()) / "inferd-cascade"))
    p = sub.add_parser("three-tier")
    p.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "inferd-three-tier"))
    p.add_argument("--thresholds", default="0.5,0.5")
    p.add_argument("--count", type=int, default=10)
    p = sub.add_parser("forecast")
    p.add_argument("--traces", default="diurnal,step,ramp")
    p.add_argument("--seconds", type=int, default=180)
    p = sub.add_parser("edge-cloud")
    p.add_argument("--seconds", type=int, default=40)
    p.add_argument("--peak", type=int, default=300)
    p.add_argument("--capacity", type=int, default=200)
    args = parser.parse_args()
    {"overhead": overhead, "cascade": cascade, "three-tier": three_tier, "forecast": forecast, "edge-cloud": edge_cloud}[args.command](args)


if __name__ == "__main__":
    main()
