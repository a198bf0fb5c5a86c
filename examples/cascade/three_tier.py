#!/usr/bin/env python3
"""The seeds' device -> edge server -> cloud chain as inferd routers, on the real-model set
(models/make_real_models.py: MobileNetV3-Large, EfficientNet-B0, Swin-T; random weights, so their
confidences say nothing about the images: this shows the mechanics and the cost of each tier).

  examples/cascade/three_tier.py OUT [--models DIR] [--cloud grpc://HOST:PORT] [--thresholds 0.5,0.5]

writes OUT/repository with the three models and two routers:
  three_tier    a cascade: mobilenet_v3_large, then efficientnet_b0 when its top softmax probability
                is below the first threshold, then swin_t (or, with --cloud, `pool cloud`: another
                inferd serving swin_t) below the second;
  by_complexity the seeds' split by estimated complexity (the input's byte entropy): < 0.3
                mobilenet_v3_large, 0.3-0.7 efficientnet_b0, >= 0.7 swin_t (or the pool).
--models is make_real_models.py's output (built there when missing).
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["mobilenet_v3_large", "efficientnet_b0", "swin_t"]

CLASSIFIER = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "output" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
"""

ROUTER_HEAD = """name: "{name}"
platform: "router"
max_batch_size: 8
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "output" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
"""


def parameter(key, value):
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", type=Path)
    parser.add_argument("--cloud", help="grpc://HOST:PORT of an inferd serving swin_t: the last tier becomes a pool")
    parser.add_argument("--thresholds", default="0.5,0.5")
    args = parser.parse_args()
    models = args.models or args.out / "real_models"
    missing = [name for name in MODELS if not (models / name / "model.onnx").exists()]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "models" / "make_real_models.py"), str(models), "--only",
                        ",".join(missing)], check=True)
    repository = args.out / "repository"
    for name in MODELS:
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        shutil.copy(models / name / "model.onnx", repository / name / "1" / "model.onnx")
        (repository / name / "config.pbtxt").write_text(CLASSIFIER.format(name=name))
    last = "pool cloud" if args.cloud else "model swin_t"
    pool = (parameter("pool.cloud", args.cloud) + parameter("pool_options.cloud", "model=swin_t")) if args.cloud else ""
    cascade = (ROUTER_HEAD.format(name="three_tier") +
               parameter("cascade.tiers", f"model mobilenet_v3_large, model efficientnet_b0, {last}") +
               parameter("cascade.thresholds", args.thresholds.replace(",", ", ")) +
               parameter("cascade.confidence", "max_softmax output") + pool)
    split = (ROUTER_HEAD.format(name="by_complexity") + parameter("complexity", "entropy input") +
             parameter("route.1", "complexity < 0.3 -> model mobilenet_v3_large") +
             parameter("route.2", "complexity < 0.7 -> model efficientnet_b0") +
             parameter("route.default", last) + pool)
    for name, config in (("three_tier", cascade), ("by_complexity", split)):
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        (repository / name / "config.pbtxt").write_text(config)
    print(f"wrote {repository}")


if __name__ == "__main__":
    main()
