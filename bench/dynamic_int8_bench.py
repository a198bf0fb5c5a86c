#!/usr/bin/env python3
"""Dynamically quantised models as ONNX Runtime's quantize_dynamic writes them, side by side: each
MatMul with constant weights becomes DynamicQuantizeLinear -> MatMulInteger (int8 weights, per
tensor, symmetric) -> Cast -> Mul(x_scale * w_scale), the QOperator spelling ORT's tool emits
(written by models/dynamic_quantize.py, since PyPI's onnxruntime and its quantiser are not
reachable). Then batch-8 throughput and batch-1 latency of inferd and ORT on that same file,
inferd fp32 and ORT fp32, and the dynamic model's relative logit error against fp32.

  /usr/bin/python3 bench/dynamic_int8_bench.py [--models bert_encoder] [--rounds 3]

Needs `bash scripts/setup.sh --bench` and a release build.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import engine_bench as eb  # noqa: E402
import int8_bench as ib  # noqa: E402
from dynamic_quantize import write_dynamic_quantized  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bert_encoder")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=50, help="inputs for the error against fp32")
    args = parser.parse_args()
    names = args.models.split(",")
    eb.ensure_models(names)
    eb.ensure_ort()
    print(f"CPU flags: {ib.cpu_flags()}; {args.threads} intra-op threads per engine; median of {args.rounds} "
          "interleaved rounds\n")
    print("| model | MatMuls quantised | dyn b8 items/s | fp32 b8 | ORT fp32 b8 | ORT dyn (same file) b8 | dyn/ORT fp32 b8 | "
          "dyn/ORT dyn b8 | dyn/fp32 b8 | dyn b1 p50 ms | ORT dyn b1 p50 ms | dyn/ORT dyn b1 latency | top-1 agreement | "
          "rel. output error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in names:
            model = eb.MODELS_DIR / name / "model.onnx"
            shape = json.loads((eb.MODELS_DIR / name / "info.json").read_text())["sample_shape"]
            dynamic = work / f"{name}.dynamic.onnx"
            count = write_dynamic_quantized(model, dynamic)
            rounds = {k: [] for k in ("d8", "f8", "o8", "od8", "d1", "od1")}
            b8_iterations = max(3, args.iterations // 4)
            for _ in range(args.rounds):
                rounds["d8"].append(eb.run_inferd(dynamic, 8, b8_iterations, args.threads))
                rounds["o8"].append(eb.run_ort(model, [8, *shape], b8_iterations, args.threads))
                rounds["f8"].append(eb.run_inferd(model, 8, b8_iterations, args.threads))
                rounds["od8"].append(eb.run_ort(dynamic, [8, *shape], b8_iterations, args.threads))
                rounds["d1"].append(eb.run_inferd(dynamic, 1, args.iterations, args.threads))
                rounds["od1"].append(eb.run_ort(dynamic, [1, *shape], args.iterations, args.threads))
            d8, f8, o8, od8, d1, od1 = (eb.median_of(rounds[k]) for k in ("d8", "f8", "o8", "od8", "d1", "od1"))
            agree, error = ib.agreement(model, dynamic, shape, args.samples, work)
            t = "throughput_per_s"
            print(f"| {name} | {count} | {eb.cell(d8, t, '{:.1f}')} | {eb.cell(f8, t, '{:.1f}')} | {eb.cell(o8, t, '{:.1f}')} "
                  f"| {eb.cell(od8, t, '{:.1f}')} | {eb.ratio(d8, o8, t)} | {eb.ratio(d8, od8, t)} | {eb.ratio(d8, f8, t)} "
                  f"| {eb.cell(d1, 'p50_ms')} | {eb.cell(od1, 'p50_ms')} | {eb.ratio(d1, od1, 'p50_ms')} | {agree:.3f} "
                  f"| {error:.4f} |", flush=True)
            for label, result in (("dyn b8", d8), ("ORT dyn b8", od8)):
                if "error" in result:
                    print(f"  {name} {label}: {result['error']}", file=sys.stderr)


if __name__ == "__main__":
    main()
