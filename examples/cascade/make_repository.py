#!/usr/bin/env python3
"""A confidence cascade on real, trained classifiers: a small and a large model trained (PyTorch)
on scikit-learn's bundled digits data set (8x8 images of 0-9; Debian's python3-sklearn ships it,
nothing is downloaded), exported to ONNX, and routers that run the small one and escalate to the
large one when its top softmax probability is below a threshold.

  examples/cascade/make_repository.py OUT [--thresholds 0,0.5,0.9,1]

writes OUT/repository/{small,large,cascade_T...} (T = the threshold x 100, e.g. cascade_090) and the
held-out test set as OUT/test_x.npy (FP32 [N, 64], pixels / 16) and OUT/test_y.npy (INT64 [N]).
Serve with `inferd serve --model-repository OUT/repository`; bench/router_bench.py cascade uses it.
"""
import argparse
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

SEED = 7


def train(model, x, y, epochs, lr):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            optimizer.step()
    return model.eval()


def export(model, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, torch.zeros(1, 64), str(path), input_names=["PIXELS"], output_names=["LOGITS"],
                      dynamic_axes={"PIXELS": {0: "batch"}, "LOGITS": {0: "batch"}}, opset_version=13)


CLASSIFIER = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "PIXELS" data_type: TYPE_FP32 dims: [ 64 ] }} ]
output [ {{ name: "LOGITS" data_type: TYPE_FP32 dims: [ 10 ] }} ]
"""

CASCADE = """name: "{name}"
platform: "router"
max_batch_size: 8
input [ {{ name: "PIXELS" data_type: TYPE_FP32 dims: [ 64 ] }} ]
output [ {{ name: "LOGITS" data_type: TYPE_FP32 dims: [ 10 ] }} ]
parameters {{ key: "cascade.tiers" value {{ string_value: "model small, model large" }} }}
parameters {{ key: "cascade.thresholds" value {{ string_value: "{threshold}" }} }}
parameters {{ key: "cascade.confidence" value {{ string_value: "max_softmax LOGITS" }} }}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--thresholds", default="0,0.5,0.8,0.9,0.95,0.99,1")
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(SEED))
    train_idx, test_idx = order[:1000], order[1000:]
    # Small: a linear classifier (640 multiply-adds). Large: a wide MLP (about 8.5 million).
    small = train(torch.nn.Linear(64, 10), x[train_idx], y[train_idx], epochs=60, lr=0.05)
    large = train(torch.nn.Sequential(torch.nn.Linear(64, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                      torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                      torch.nn.Linear(2048, 10)),
                  x[train_idx], y[train_idx], epochs=30, lr=1e-3)
    repository = args.out / "repository"
    for name, model in (("small", small), ("large", large)):
        export(model, repository / name / "1" / "model.onnx")
        (repository / name / "config.pbtxt").write_text(CLASSIFIER.format(name=name))
        with torch.no_grad():
            accuracy = (model(x[test_idx]).argmax(1) == y[test_idx]).float().mean().item()
        print(f"{name}: test accuracy {accuracy:.4f} (PyTorch)")
    for threshold in (float(t) for t in args.thresholds.split(",")):
        name = f"cascade_{round(threshold * 100):03d}"
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        (repository / name / "config.pbtxt").write_text(CASCADE.format(name=name, threshold=threshold))
    np.save(args.out / "test_x.npy", x[test_idx].numpy())
    np.save(args.out / "test_y.npy", y[test_idx].numpy())
    print(f"wrote {repository} and {len(test_idx)} test samples")


if __name__ == "__main__":
    main()
