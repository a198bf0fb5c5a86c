#!/usr/bin/env python3
"""Builds the real-model set for the runtime's correctness tests and benchmarks with Debian's
python3-torch / python3-torchvision: random weights (fixed seed), nothing downloaded.

  /usr/bin/python3 models/make_real_models.py OUT_DIR [--only mlp,mobilenet_v3_large] [--batch 1]

For each model, OUT_DIR/NAME/ gets:
  model.onnx     exported in eval mode, opset 17, first dim dynamic ("batch")
  input.npy      a fixed input (seeded), batch --batch
  expected.npy   PyTorch's output for it (the reference inferd must match)
  info.json      input name, shape, flops estimate where known

Models: mlp (3 layers), mobilenet_v3_large, efficientnet_b0, resnet50, swin_t, bert_encoder
(12-layer nn.TransformerEncoder, d_model 768, 12 heads, seq 128; input [batch, 128, 768]).
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torchvision

# Multiply-accumulates per image/sequence x 2 (FLOPs), for GFLOP/s next to the timings.
GFLOPS = {"resnet50": 8.2, "mobilenet_v3_large": 0.44, "efficientnet_b0": 0.78, "swin_t": 9.0,
          "bert_encoder": 22.0, "mlp": 0.0}


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                          torch.nn.ReLU(), torch.nn.Linear(512, 10))

    def forward(self, x):
        return self.layers(x)


def bert_encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0,
                                             activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)


MODELS = {
    "mlp": (Mlp, (256,)),
    "mobilenet_v3_large": (lambda: torchvision.models.mobilenet_v3_large(weights=None), (3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (3, 224, 224)),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), (3, 224, 224)),
    "swin_t": (lambda: torchvision.models.swin_t(weights=None), (3, 224, 224)),
    "bert_encoder": (bert_encoder, (128, 768)),
}


def randomize_batchnorm(model, generator):
    # Fresh BatchNorm layers are identity (mean 0, var 1); random statistics make Conv+BN folding matter.
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)


def build(name, out_dir, batch):
    factory, sample_shape = MODELS[name]
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    model = factory().eval()
    with torch.no_grad():
        randomize_batchnorm(model, generator)
        x = torch.randn((batch, *sample_shape), generator=generator)
        expected = model(x)
    target = out_dir / name
    target.mkdir(parents=True, exist_ok=True)
    # Exported with autograd on: under no_grad, nn.TransformerEncoder takes its fused fast path,
    # which has no ONNX export.
    torch.onnx.export(model, x, str(target / "model.onnx"), input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17,
                      do_constant_folding=True)
    np.save(target / "input.npy", x.numpy())
    np.save(target / "expected.npy", expected.numpy())
    (target / "info.json").write_text(json.dumps({"input": "input", "sample_shape": list(sample_shape),
                                                  "gflops_per_sample": GFLOPS[name]}))
    print(f"{name}: {target / 'model.onnx'} ({(target / 'model.onnx').stat().st_size / 1e6:.1f} MB)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(2)
    for name in args.only.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name}; known: {', '.join(MODELS)}")
        build(name, args.out_dir, args.batch)


if __name__ == "__main__":
    main()
