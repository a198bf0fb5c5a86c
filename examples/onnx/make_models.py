#!/usr/bin/env python3
"""Builds the small ONNX models of examples/model_repository with Debian's python3-onnx (fixed
seeds, nothing downloaded). The files are checked in; run this to rebuild them:

  /usr/bin/python3 examples/onnx/make_models.py examples/model_repository

  mlp_onnx   3-layer MLP, input "features" [batch, 16] FP32 -> output "scores" [batch, 4]
             (Gemm + Relu, Gemm + Relu, Gemm, Softmax). No config.pbtxt: inferd completes it
             from the model, as Triton does.
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp_model(seed=7):
    rng = np.random.default_rng(seed)
    sizes = [16, 32, 32, 4]
    nodes, initializers = [], []
    current = "features"
    for layer, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        weight = (rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32)
        bias = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
        initializers += [numpy_helper.from_array(weight, f"w{layer}"), numpy_helper.from_array(bias, f"b{layer}")]
        out = f"dense{layer}"
        nodes.append(helper.make_node("Gemm", [current, f"w{layer}", f"b{layer}"], [out], name=f"gemm{layer}", transB=1))
        current = out
        if layer < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [current], [f"relu{layer}"], name=f"relu{layer}"))
            current = f"relu{layer}"
    nodes.append(helper.make_node("Softmax", [current], ["scores"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 4])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="inferd-examples")
    onnx.checker.check_model(model)
    return model


def main():
    repository = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/model_repository")
    target = repository / "mlp_onnx" / "1"
    target.mkdir(parents=True, exist_ok=True)
    onnx.save(mlp_model(), target / "model.onnx")
    print(f"wrote {target / 'model.onnx'}")


if __name__ == "__main__":
    main()
