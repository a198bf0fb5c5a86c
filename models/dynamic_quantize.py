#!/usr/bin/env python3
"""Writes a model dynamically quantised the way ONNX Runtime's quantize_dynamic does it (PyPI's
onnxruntime and its quantiser are not reachable here): every MatMul with 2-D constant fp32 weights
becomes DynamicQuantizeLinear(x) -> MatMulInteger(x_q, int8 W, x_zero_point, 0) -> Cast(FLOAT) ->
Mul(., Mul(x_scale, w_scale)), weights per tensor and symmetric, one DynamicQuantizeLinear per
input shared by the products that read it. For bench/dynamic_int8_bench.py and tests/e2e/test_int8.py.

  /usr/bin/python3 models/dynamic_quantize.py MODEL.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def constant_weights(graph):
    """name -> fp32 2-D array for initializers, also reached through Identity (PyTorch's shared weights)."""
    initializers = {t.name: t for t in graph.initializer}
    alias = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Identity" and n.input[0] in initializers}
    weights = {}
    for name, tensor in initializers.items():
        if tensor.data_type == TensorProto.FLOAT and len(tensor.dims) == 2:
            weights[name] = numpy_helper.to_array(tensor)
    for out, source in alias.items():
        if source in weights:
            weights[out] = weights[source]
    return weights


def write_dynamic_quantized(model_path, out_path):
    """Rewrites every MatMul with 2-D constant weights as ORT's dynamic quantisation does; returns how many."""
    model = onnx.load(str(model_path))
    graph = model.graph
    weights = constant_weights(graph)
    nodes, quantized_inputs, count = [], {}, 0
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            nodes.append(node)
            continue
        x, w = node.input[0], weights[node.input[1]]
        if x not in quantized_inputs:  # one DynamicQuantizeLinear per input, shared (Q, K, V)
            quantized_inputs[x] = (f"{x}_quantized", f"{x}_scale", f"{x}_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(quantized_inputs[x])))
        x_q, x_scale, x_zero = quantized_inputs[x]
        prefix = f"{node.output[0]}_dynamic"
        scale = float(np.abs(w).max()) / 127 or 1.0
        graph.initializer.extend([
            numpy_helper.from_array(np.clip(np.rint(w / scale), -127, 127).astype(np.int8), f"{prefix}_w"),
            numpy_helper.from_array(np.array(scale, dtype=np.float32), f"{prefix}_w_scale"),
            numpy_helper.from_array(np.array(0, dtype=np.int8), f"{prefix}_w_zero_point")])
        nodes += [helper.make_node("MatMulInteger", [x_q, f"{prefix}_w", x_zero, f"{prefix}_w_zero_point"],
                                   [f"{prefix}_sums"]),
                  helper.make_node("Cast", [f"{prefix}_sums"], [f"{prefix}_float"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [x_scale, f"{prefix}_w_scale"], [f"{prefix}_scale"]),
                  helper.make_node("Mul", [f"{prefix}_float", f"{prefix}_scale"], [node.output[0]])]
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(out_path))
    return count


if __name__ == "__main__":
    print(f"{write_dynamic_quantized(sys.argv[1], sys.argv[2])} MatMuls quantised -> {sys.argv[2]}")
