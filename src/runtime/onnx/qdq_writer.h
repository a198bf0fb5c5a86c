// Writes a quantised model in ONNX's standard QDQ form, the form ONNX Runtime's own quantiser
// writes and runs: every quantised activation X becomes
//   X -> QuantizeLinear(X_scale, X_zero_point) -> DequantizeLinear(X_scale, X_zero_point) -> the op,
// and every quantised weight an int8 initializer read through DequantizeLinear (per output channel,
// symmetric, zero point 0); a Conv's bias becomes int32 at scale X_scale * W_scale[c]. Any runtime
// that knows the ops runs the file; one that fuses the pattern (passes/qdq_fusion.cc) runs int8.
//
// Quantised: Conv with a constant weight, MatMul with a constant 2-D B, Gemm with a constant B.
// Only their inputs get Q/DQ pairs; every other reader of a tensor keeps its fp32 value.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace onnx {
class ModelProto;
}

namespace inferd::runtime {

// One node the writer quantises: its activation input and its weight, and the weight's output
// channel axis (Conv 0; MatMul 1; Gemm 0 or 1 by transB).
struct QuantizableNode {
  int node_index = 0;
  std::string activation, weight, bias;  // bias: a Conv's constant bias, or empty
  int weight_axis = 0;
};

std::vector<QuantizableNode> FindQuantizableNodes(const onnx::ModelProto& model);

// How an activation is quantised: uint8 over [0, 255 * scale] when the calibration never saw it
// negative (after Relu), else int8 over [-127, 127] * scale; the zero point is 0 either way.
struct ActivationQuantization {
  float scale = 1;
  bool is_signed = false;
  uint8_t zero_point = 0;  // uint8 only (asymmetric activations); int8 ones are symmetric
};

// Rewrites `model` in place. `activations` holds an entry for every node's activation; weights are
// read from the model (external data under `base_dir`) and written back inline.
Status WriteQdq(onnx::ModelProto* model, const std::vector<QuantizableNode>& nodes,
                const std::map<std::string, ActivationQuantization>& activations,
                const std::filesystem::path& base_dir);

}  // namespace inferd::runtime
