#!/usr/bin/env python3
"""An HPA dry run: what deploy/kubernetes/hpa.yaml would do under a load ramp, from a real
inferd's metrics, with no cluster.

  /usr/bin/python3 bench/hpa_dry_run.py [--steps 100,500,1000,...] [--step-secs 20] [--out docs/hpa-dry-run.png]

It starts `inferd serve` on an identity model that burns a fixed CPU time per execution (so CPU
follows the load), drives it with `inferd bench --request-rate R` through a ramp of rates, and reads
/metrics every second. At each HPA sync (every 15 s) it computes, as the HPA controller does:
  - requests_per_second as the Prometheus Adapter's rule does (rate over 1 m of
    inferd_requests_total), and the CPU in cores (rate of inferd_process_cpu_seconds_total);
  - per metric, desired = ceil(current x metric_per_pod / target), with no change while the ratio
    is within the 10 % tolerance; the larger of the two wins;
  - the scale-up policy (at most +100 % or +4 pods per 15 s) and the scale-down stabilisation
    window (the highest desired count of the last 300 s), within minReplicas..maxReplicas.
The one server takes the whole load; the simulated replicas share it evenly, so a metric per pod
is the measured total over the current replica count. Writes a CSV next to the plot, prints a
table and the CPU flags. Needs `bash scripts/build.sh release` and python3-matplotlib.
"""
import argparse
import math
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import requests

from first_traffic_bench import cpu_flags
from http_bench import INFERD, ROOT, free_port, wait_http

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from inferd_harness import scalar_identity, write_repository  # noqa: E402


class HorizontalPodAutoscaler:
    """The autoscaling/v2 controller's arithmetic for one HPA (Kubernetes' documented algorithm)."""

    def __init__(self, min_replicas=2, max_replicas=10, tolerance=0.1, scale_down_window_s=300,
                 scale_up_percent=100, scale_up_pods=4):
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.tolerance = tolerance
        self.scale_down_window_s = scale_down_window_s
        self.scale_up_percent, self.scale_up_pods = scale_up_percent, scale_up_pods
        self.replicas = min_replicas
        self.recommendations = deque()  # (time, desired): the scale-down stabilisation window

    def desired_for(self, metric_per_pod, target_per_pod):
        ratio = metric_per_pod / target_per_pod
        if abs(ratio - 1) <= self.tolerance:
            return self.replicas
        return math.ceil(self.replicas * ratio)

    def sync(self, now, metrics):
        """metrics: [(total over all pods, target per pod)]. Returns the new replica count."""
        desired = max(self.desired_for(total / self.replicas, target) for total, target in metrics)
        desired = min(max(desired, self.min_replicas), self.max_replicas)
        self.recommendations.append((now, desired))
        while self.recommendations[0][0] < now - self.scale_down_window_s:
            self.recommendations.popleft()
        if desired < self.replicas:
            # Scale down only to the highest recommendation within the window.
            desired = max(d for _, d in self.recommendations)
        else:
            limit = max(self.replicas * (100 + self.scale_up_percent) // 100, self.replicas + self.scale_up_pods)
            desired = min(desired, limit)
        self.replicas = min(max(desired, self.min_replicas), self.max_replicas)
        return self.replicas


def scrape(metrics_url):
    """(requests_total over every model and outcome, process CPU seconds)."""
    text = requests.get(metrics_url, timeout=5).text
    total = sum(float(v) for v in re.findall(r"^inferd_requests_total\{[^}]*\} (\S+)$", text, re.M))
    cpu = float(re.search(r"^inferd_process_cpu_seconds_total (\S+)$", text, re.M).group(1))
    return total, cpu


def run(args):
    with tempfile.TemporaryDirectory() as tmp:
        repo = write_repository(Path(tmp) / "repo", {"identity": (scalar_identity(
            args.cost_us, "dynamic_batching { max_queue_delay_microseconds: 500 }", max_batch_size=8), [1])})
        http, metrics_port = free_port(), free_port()
        server = subprocess.Popen([INFERD, "serve", "--model-repository", str(repo), "--http-port", str(http),
                                   "--grpc-port", str(free_port()), "--metrics-port", str(metrics_port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        samples = []  # (t, offered rps, requests_total, cpu_seconds)
        offered = [0]
        stop = threading.Event()
        try:
            wait_http(f"http://127.0.0.1:{http}/v2/health/ready")
            metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
            start = time.time()

            def sampler():
                while not stop.is_set():
                    total, cpu = scrape(metrics_url)
                    samples.append((time.time() - start, offered[0], total, cpu))
                    stop.wait(1.0)

            thread = threading.Thread(target=sampler)
            thread.start()
            for rate in args.steps:
                offered[0] = rate
                if rate == 0:
                    time.sleep(args.step_secs)
                    continue
                subprocess.run([INFERD, "bench", "-u", f"127.0.0.1:{http}", "-m", "identity", "--request-rate",
                                str(rate), "--duration", str(args.step_secs), "--warmup-ms", "0", "--format", "csv"],
                               check=True, capture_output=True, timeout=args.step_secs * 4 + 60)
            stop.set()
            thread.join()
        finally:
            stop.set()
            server.terminate()
            server.wait(timeout=60)
    return samples


def value_at(samples, t, column):
    """Linear interpolation of a counter column at time t (samples are ~1 s apart)."""
    for (t0, *a), (t1, *b) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            x0, x1 = a[column - 1], b[column - 1]
            return x0 + (x1 - x0) * (t - t0) / (t1 - t0)
    return samples[0][column] if t < samples[0][0] else samples[-1][column]


def simulate(samples, args):
    hpa = HorizontalPodAutoscaler(args.min_replicas, args.max_replicas, scale_down_window_s=args.stabilization_secs)
    rows = []
    t = args.sync_secs
    while t <= samples[-1][0]:
        rps = (value_at(samples, t, 2) - value_at(samples, max(0.0, t - 60), 2)) / 60  # the adapter's rate(...[1m])
        cores = (value_at(samples, t, 3) - value_at(samples, max(0.0, t - 15), 3)) / min(15.0, t)
        by_rps = HorizontalPodAutoscaler.desired_for(hpa, rps / hpa.replicas, args.target_rps)
        by_cpu = HorizontalPodAutoscaler.desired_for(hpa, cores / hpa.replicas, args.cpu_request * args.cpu_target)
        offered = [s[1] for s in samples if s[0] <= t][-1]
        replicas = hpa.sync(t, [(rps, args.target_rps), (cores, args.cpu_request * args.cpu_target)])
        rows.append((t, offered, rps, cores, by_rps, by_cpu, replicas))
        t += args.sync_secs
    return rows


def plot(rows, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r[0] for r in rows]
    figure, (load, pods) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    load.step(t, [r[1] for r in rows], where="post", label="offered load (inferd bench --request-rate)", color="grey")
    load.plot(t, [r[2] for r in rows], label="requests_per_second (the adapter's rate over 1 m)")
    load.axhline(args.target_rps, linestyle=":", color="black", label=f"target per pod ({args.target_rps})")
    load.set_ylabel("requests / s")
    load.legend(loc="upper left", fontsize=8)
    pods.step(t, [r[4] for r in rows], where="post", label="desired by requests_per_second", linestyle="--")
    pods.step(t, [r[5] for r in rows], where="post", label=f"desired by CPU ({args.cpu_target:.0%} of "
              f"{args.cpu_request:g} cores)", linestyle=":")
    pods.step(t, [r[6] for r in rows], where="post", label="replicas (policies, 300 s scale-down window)", linewidth=2)
    pods.set_ylabel("replicas")
    pods.set_xlabel("seconds")
    pods.set_ylim(0, args.max_replicas + 1)
    pods.legend(loc="upper left", fontsize=8)
    figure.suptitle("HPA dry run: deploy/kubernetes/hpa.yaml on a real inferd's metrics")
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="100,400,800,1500,2500,3000,3000,1500,600" + ",200" * 17,
                        help="offered request rates, one per step")
    parser.add_argument("--step-secs", type=int, default=20)
    parser.add_argument("--cost-us", type=int, default=300, help="CPU time per execution of the identity model")
    parser.add_argument("--target-rps", type=float, default=500)
    parser.add_argument("--cpu-request", type=float, default=2.0, help="cores a pod requests (deployment.yaml)")
    parser.add_argument("--cpu-target", type=float, default=0.6)
    parser.add_argument("--min-replicas", type=int, default=2)
    parser.add_argument("--max-replicas", type=int, default=10)
    parser.add_argument("--sync-secs", type=int, default=15)
    parser.add_argument("--stabilization-secs", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "hpa-dry-run.png")
    args = parser.parse_args()
    args.steps = [int(s) for s in args.steps.split(",")]
    samples = run(args)
    rows = simulate(samples, args)
    with open(args.out.with_suffix(".csv"), "w") as out:
        out.write("seconds,offered_rps,requests_per_second,cpu_cores,desired_by_rps,desired_by_cpu,replicas\n")
        for row in rows:
            out.write(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + "\n")
    print(f"CPU flags: {cpu_flags()}")
    print("| s | offered rps | requests_per_second | CPU cores | desired by rps | desired by CPU | replicas |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(f"{v:.0f}" if isinstance(v, float) else str(v) for v in row[:2]) +
              f" | {row[2]:.0f} | {row[3]:.2f} | {row[4]} | {row[5]} | {row[6]} |")
    plot(rows, args)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
