#!/usr/bin/env python3
"""Per-layer time of inferd against ONNX Runtime on one model: where does the gap come from?

  bench/layer_compare.py MODEL.onnx [--batch 8] [--iterations 20] [--threads 2] [--top 25]

Runs `inferd run --profile --json` (every node's time after fusion) and onnxruntime-node with its
profiler on (bench/engine/ort_profile.js), then matches the two by ONNX node: inferd keeps the
name of the node an activation or residual Add was fused into; ORT's fused nodes are followed
back to that node (ort_node_to_onnx_node). Prints the nodes with the largest difference, then
totals per kind of node (convolutions split by kernel size, group and stride); what ORT runs that
inferd has no node for (its layout reorders) is one line. Both engines run in one process each,
after a warm-up run; times are per run, in ms, and ORT's profiler adds to ORT's (compare kinds,
not totals with engine_bench.py). Needs the release build and `bash scripts/setup.sh --bench`
(onnxruntime-node, python3-onnx).
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
INFERD = os.environ.get("INFERD_BIN", str(ROOT / "build" / "src" / "server" / "inferd"))
ORT_DIR = ROOT / "bench" / "engine"
FOLLOWED_OPS = {"Relu", "Clip", "HardSigmoid", "HardSwish", "Add", "Mul", "Sigmoid"}


def inferd_profile(model, batch, iterations, threads):
    result = subprocess.run([INFERD, "run", model, "--batch", str(batch), "--iterations", str(iterations),
                             "--threads", str(threads), "--profile", "--json"], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    return report["p50_ms"], {node["name"]: (node["op"], node["ms"]) for node in report["profile"]}


def ort_profile(model, input_name, dims, iterations, threads):
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "ort")
        subprocess.run(["node", str(ORT_DIR / "ort_profile.js"), model, input_name, ",".join(map(str, dims)),
                        str(iterations), str(threads), prefix], check=True, cwd=ORT_DIR)
        events = json.load(open(glob.glob(prefix + "*.json")[0]))
    # The profiler is on from the start: leave out the warm-up run (the first model_run).
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    warmup_end = runs[0][1] if len(runs) > iterations else 0
    times = collections.defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and event["ts"] >= warmup_end:
            times[event["name"][:-len("_kernel_time")]] += event["dur"] / 1000 / iterations
    return times


def ort_node_to_onnx_node(name, producer, by_name, ours):
    """ORT's name for a (possibly fused) node -> the ONNX node inferd ran it in, or None.

    ORT names a plain node as the model does, a node its fusions made after the first node they
    replaced plus a suffix ("/.../Mul/QuickGeluFusion/"), and an NCHWc Conv after its output value
    ("..._nchwc"). From there, back through activations, to a node inferd kept."""
    node = by_name.get(name)
    parts = name.rstrip("/").split("/")
    while node is None and len(parts) > 1:
        parts.pop()
        node = by_name.get("/".join(parts))
    if node is None:
        node = producer.get(name[:-len("_nchwc")] if name.endswith("_nchwc") else name)
    while node is not None and node.name not in ours and node.op_type in FOLLOWED_OPS and node.input:
        node = producer.get(node.input[0])
    return node


def kind_of(node, initializers):
    if node is None:
        return "other"
    if node.op_type != "Conv" or len(node.input) < 2 or node.input[1] not in initializers:
        return node.op_type
    attrs = {a.name: (list(a.ints) or a.i) for a in node.attribute}
    w = initializers[node.input[1]].dims
    stride = attrs.get("strides", [1])[0]
    group = "dw" if attrs.get("group", 1) > 1 else ""
    return f"Conv {group}{w[2]}x{w[3]} s{stride}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    args.model = str(Path(args.model).resolve())  # node runs in bench/engine
    model = onnx.load(args.model)
    initializers = {i.name: i for i in model.graph.initializer}
    graph_input = next(i for i in model.graph.input if i.name not in initializers)
    dims = [d.dim_value or args.batch for d in graph_input.type.tensor_type.shape.dim]
    dims[0] = args.batch
    producer = {out: node for node in model.graph.node for out in node.output}
    by_name = {node.name: node for node in model.graph.node}

    inferd_p50, ours = inferd_profile(args.model, args.batch, args.iterations, args.threads)
    theirs = collections.defaultdict(float)
    for name, ms in ort_profile(args.model, graph_input.name, dims, args.iterations, args.threads).items():
        node = ort_node_to_onnx_node(name, producer, by_name, ours)
        theirs[node.name if node is not None and node.name in ours else name] += ms

    print(f"{args.model}, batch {args.batch}, {args.threads} threads: inferd p50 {inferd_p50:.2f} ms; "
          f"sum of node times inferd {sum(ms for _, ms in ours.values()):.2f} ms, ORT {sum(theirs.values()):.2f} ms")
    rows = sorted(((ms - theirs.get(name, 0.0), name, op, ms) for name, (op, ms) in ours.items()), reverse=True)
    print(f"\n{'node (largest gaps first)':60s} {'op':18s} {'inferd':>8s} {'ORT':>8s} {'diff':>8s}")
    for diff, name, op, ms in rows[:args.top]:
        print(f"{name[-60:]:60s} {op:18s} {ms:8.3f} {theirs.get(name, 0.0):8.3f} {diff:+8.3f}")

    kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for name, (op, ms) in ours.items():
        entry = kinds[kind_of(by_name.get(name), initializers)]
        entry[0] += 1
        entry[1] += ms
        entry[2] += theirs.get(name, 0.0)
    unmatched = sum(ms for name, ms in theirs.items() if name not in ours)
    print(f"\n{'kind':20s} {'nodes':>6s} {'inferd':>8s} {'ORT':>8s} {'ORT/inferd':>10s}")
    for kind, (count, ms, their_ms) in sorted(kinds.items(), key=lambda item: -item[1][1]):
        print(f"{kind:20s} {count:6d} {ms:8.3f} {their_ms:8.3f} {their_ms / max(ms, 1e-9):10.2f}")
    print(f"{'ORT only (reorders)':20s} {'':6s} {'':8s} {unmatched:8.3f}")


if __name__ == "__main__":
    sys.exit(main())
