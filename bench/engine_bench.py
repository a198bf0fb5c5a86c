#!/usr/bin/env python3
"""inferd's runtime against ONNX Runtime (onnxruntime-node) and PyTorch (TorchScript), side by side
on the same model files and the same machine, in one run.

  /usr/bin/python3 bench/engine_bench.py [--models mobilenet_v3_large,resnet50] [--iterations 20] [--precision bf16]

Models come from models/make_real_models.py (built once into .cache/models). For each model:
batch-1 latency (p50, p90), batch-8 throughput, load time, peak RSS, inferd/ORT ratios, and
inferd's GFLOP/s; with --batch32 also batch-32 throughput. Every engine gets the same intra-op
thread count (--threads, default 2). Needs
`bash scripts/setup.sh --bench` (python3-torch, python3-torchvision, nodejs, npm) and a release build.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERD = os.environ.get("INFERD_BIN", str(ROOT / "build" / "src" / "server" / "inferd"))
MODELS_DIR = ROOT / ".cache" / "models"
ORT_DIR = ROOT / "bench" / "engine"
ALL = ["mlp", "mobilenet_v3_large", "efficientnet_b0", "resnet50", "swin_t", "bert_encoder"]


def ensure_models(names):
    missing = [n for n in names if not (MODELS_DIR / n / "model.onnx").exists()]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "models" / "make_real_models.py"), str(MODELS_DIR), "--only",
                        ",".join(missing)], check=True)


def ensure_ort():
    if not (ORT_DIR / "node_modules" / "onnxruntime-node").exists():
        # The package's install script only fetches optional GPU libraries (from nuget, which this
        # machine cannot reach); the CPU library ships inside the package.
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=ORT_DIR, check=True)


def run_inferd(model, batch, iterations, threads, precision="fp32"):
    out = subprocess.run([INFERD, "run", str(model), "--batch", str(batch), "--iterations", str(iterations),
                          "--warmup", "3", "--threads", str(threads), "--precision", precision, "--json"],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[:200]}
    return json.loads(out.stdout)


def run_ort(model, dims, iterations, threads):
    out = subprocess.run(["node", "ort_bench.js", str(model), "input", ",".join(map(str, dims)), str(iterations), "3",
                          str(threads)], cwd=ORT_DIR, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[:200]}
    return json.loads(out.stdout)


TORCH_SCRIPT = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import torch
import make_real_models as m
name, batch, iterations, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
factory, shape = m.MODELS[name]
torch.manual_seed(0)
start = time.perf_counter()
model = factory().eval()
x = torch.randn((batch, *shape))
with torch.no_grad():
    traced = torch.jit.freeze(torch.jit.trace(model, x))
    load_ms = (time.perf_counter() - start) * 1000
    times = []
    for i in range(3 + iterations):
        t = time.perf_counter()
        traced(x)
        if i >= 3:
            times.append((time.perf_counter() - t) * 1000)
times.sort()
pick = lambda p: times[min(len(times) - 1, round(p / 100 * (len(times) - 1)))]
print(json.dumps({"load_ms": load_ms, "p50_ms": pick(50), "p90_ms": pick(90),
                  "throughput_per_s": batch * len(times) / (sum(times) / 1000),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_torch(name, batch, iterations, threads):
    out = subprocess.run([sys.executable, "-c", TORCH_SCRIPT, str(ROOT / "models"), name, str(batch), str(iterations),
                          str(threads)], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:200] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


CEILING_SCRIPT = r"""
import json, subprocess, sys, tempfile
from pathlib import Path
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
inferd, threads, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
weights = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "ceiling",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])],
                          [numpy_helper.from_array(weights, "b")])
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "matmul.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    out = subprocess.run([inferd, "run", str(path), "--iterations", "10", "--warmup", "3", "--threads", threads,
                          "--json"], capture_output=True, text=True)
print(out.stdout if out.returncode == 0 else "{}")
"""


def matmul_ceiling(threads, size=2048):
    """GFLOP/s of one large FP32 MatMul on inferd's runtime (a oneDNN GEMM with nothing around it):
    the rate the models' GFLOP/s compare against on this machine. In a child process: importing
    numpy here would raise the peak RSS that every engine launched later inherits from us."""
    out = subprocess.run([sys.executable, "-c", CEILING_SCRIPT, INFERD, str(threads), str(size)],
                         capture_output=True, text=True, timeout=600)
    try:
        result = json.loads(out.stdout)
    except json.JSONDecodeError:
        return None
    if "p50_ms" not in result:
        return None
    return 2 * size ** 3 / (result["p50_ms"] / 1000) / 1e9


def median_of(results):
    """Per key, the median over rounds (errors win: one failed round marks the engine failed)."""
    for result in results:
        if "error" in result:
            return result
    if not results:
        return {}
    return {key: statistics.median(r[key] for r in results) for key, value in results[0].items()
            if isinstance(value, (int, float))}  # not "precision": an even count would average strings


def cell(result, key, fmt="{:.2f}"):
    return fmt.format(result[key]) if key in result else "err"


def ratio(a, b, key):
    return f"{a[key] / b[key]:.2f}" if key in a and key in b else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(ALL))
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--batch32", action="store_true",
                        help="also batch-32 throughput (inferd and ORT; long for the transformers)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                        help="inferd's precision (ORT and PyTorch stay fp32): bf16 convolutions where the CPU has them")
    parser.add_argument("--rounds", type=int, default=3,
                        help="passes per model, engines interleaved within each; the table shows medians")
    args = parser.parse_args()
    names = args.models.split(",")
    ensure_models(names)
    ensure_ort()
    ceiling = matmul_ceiling(args.threads)
    if ceiling:
        print(f"ceiling: a 2048x2048x2048 FP32 MatMul on inferd's runtime runs at {ceiling:.0f} GFLOP/s here\n")
    print(f"inferd in {args.precision}, ORT and PyTorch in fp32; {args.threads} intra-op threads per engine; batch-1 latency over {args.iterations} runs, batch-8 throughput "
          f"over {max(3, args.iterations // 4)} runs, after 3 warm-up runs; median of {args.rounds} interleaved "
          f"rounds\n")
    print("| model | inferd b1 p50/p90 ms | ORT b1 p50/p90 ms | torch b1 p50 ms | inferd/ORT b1 latency | "
          "inferd b8 img/s | ORT b8 img/s | torch b8 img/s | inferd/ORT b8 | inferd GFLOP/s b8 | "
          "load ms inferd/ORT | peak RSS MB inferd/ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    batch32 = []
    for name in names:
        model = MODELS_DIR / name / "model.onnx"
        info = json.loads((MODELS_DIR / name / "info.json").read_text())
        b8_iterations = max(3, args.iterations // 4)
        # The machine is shared and noisy: engines alternate within each round, so a slow spell
        # hits both, and the median over rounds drops the outliers.
        rounds = {key: [] for key in ("ours1", "ort1", "ours8", "ort8", "torch1", "torch8", "ours32", "ort32")}
        for _ in range(args.rounds):
            rounds["ours1"].append(run_inferd(model, 1, args.iterations, args.threads, args.precision))
            rounds["ort1"].append(run_ort(model, [1, *info["sample_shape"]], args.iterations, args.threads))
            rounds["ours8"].append(run_inferd(model, 8, b8_iterations, args.threads, args.precision))
            rounds["ort8"].append(run_ort(model, [8, *info["sample_shape"]], b8_iterations, args.threads))
            if not args.skip_torch:
                rounds["torch1"].append(run_torch(name, 1, args.iterations, args.threads))
                rounds["torch8"].append(run_torch(name, 8, b8_iterations, args.threads))
            if args.batch32:
                b32_iterations = max(2, args.iterations // 10)
                rounds["ours32"].append(run_inferd(model, 32, b32_iterations, args.threads, args.precision))
                rounds["ort32"].append(run_ort(model, [32, *info["sample_shape"]], b32_iterations, args.threads))
        ours1, ort1, ours8, ort8, torch1, torch8, ours32, ort32 = (
            median_of(rounds[key]) for key in ("ours1", "ort1", "ours8", "ort8", "torch1", "torch8", "ours32", "ort32"))
        if args.batch32:
            batch32.append((name, ours32, ort32))
        gflops = (f"{info['gflops_per_sample'] * ours8['throughput_per_s']:.0f}"
                  if "throughput_per_s" in ours8 and info["gflops_per_sample"] else "-")
        print(f"| {name} | {cell(ours1, 'p50_ms')}/{cell(ours1, 'p90_ms')} | {cell(ort1, 'p50_ms')}/{cell(ort1, 'p90_ms')} "
              f"| {cell(torch1, 'p50_ms')} | {ratio(ours1, ort1, 'p50_ms')} | {cell(ours8, 'throughput_per_s', '{:.1f}')} "
              f"| {cell(ort8, 'throughput_per_s', '{:.1f}')} | {cell(torch8, 'throughput_per_s', '{:.1f}')} "
              f"| {ratio(ours8, ort8, 'throughput_per_s')} | {gflops} | {cell(ours1, 'load_ms', '{:.0f}')}/"
              f"{cell(ort1, 'load_ms', '{:.0f}')} | {cell(ours8, 'peak_rss_mb', '{:.0f}')}/{cell(ort8, 'peak_rss_mb', '{:.0f}')} |",
              flush=True)
        for label, result in (("inferd b1", ours1), ("ORT b1", ort1), ("inferd b8", ours8), ("torch b1", torch1)):
            if "error" in result:
                print(f"  {name} {label}: {result['error']}", file=sys.stderr)
    if batch32:
        print(f"\nbatch 32, over {max(2, args.iterations // 10)} runs after 3 warm-up runs\n")
        print("| model | inferd b32 img/s | ORT b32 img/s | inferd/ORT b32 | peak RSS MB inferd/ORT |")
        print("|---|---:|---:|---:|---:|")
        for name, ours, ort in batch32:
            print(f"| {name} | {cell(ours, 'throughput_per_s', '{:.1f}')} | {cell(ort, 'throughput_per_s', '{:.1f}')} "
                  f"| {ratio(ours, ort, 'throughput_per_s')} | {cell(ours, 'peak_rss_mb', '{:.0f}')}/"
                  f"{cell(ort, 'peak_rss_mb', '{:.0f}')} |", flush=True)


if __name__ == "__main__":
    main()
