// Conv -> BatchNormalization with constant weights and statistics becomes one Conv:
//   a = scale / sqrt(var + eps);  W' = W * a (per output channel);  B' = (B - mean) * a + bias.
#include <algorithm>
#include <cmath>

#include "runtime/kernels/tensor_util.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

bool IsFp32Vector(const Tensor* t, int64_t size) {
  return t != nullptr && t->dtype == DataType::kFp32 && ElementsOf(*t) == size;
}

}  // namespace

StatusOr<int> FoldBatchNormIntoConv(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  const auto producers = ProducersOf(*graph);
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t b = 0; b < graph->nodes.size(); ++b) {
    const Node& bn = graph->nodes[b];
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() < 5 || !bn.HasInput(0)) continue;
    if (bn.Has("training_mode") && bn.Int("training_mode", 0).value_or(0) != 0) continue;
    if (bn.Has("spatial") && bn.Int("spatial", 1).value_or(1) != 1) continue;
    if (bn.outputs.size() > 1 && std::any_of(bn.outputs.begin() + 1, bn.outputs.end(), [](ValueId id) { return id != kNoValue; })) continue;
    const int producer = producers[bn.inputs[0]];
    if (producer < 0 || consumers[bn.inputs[0]].size() != 1 || IsGraphOutput(*graph, bn.inputs[0])) continue;
    Node& conv = graph->nodes[producer];
    if (conv.op_type != "Conv" || conv.Has("_post_ops") || !conv.HasInput(1)) continue;
    const Tensor* w = ConstantOf(*graph, conv.inputs[1]);
    if (w == nullptr || w->dtype != DataType::kFp32 || w->shape.empty()) continue;
    const int64_t channels = w->shape[0];
    const Tensor* bias = conv.HasInput(2) ? ConstantOf(*graph, conv.inputs[2]) : nullptr;
    if (conv.HasInput(2) && !IsFp32Vector(bias, channels)) continue;
    const Tensor *scale = ConstantOf(*graph, bn.inputs[1]), *shift = ConstantOf(*graph, bn.inputs[2]);
    const Tensor *mean = ConstantOf(*graph, bn.inputs[3]), *var = ConstantOf(*graph, bn.inputs[4]);
    if (!IsFp32Vector(scale, channels) || !IsFp32Vector(shift, channels) || !IsFp32Vector(mean, channels) ||
        !IsFp32Vector(var, channels)) {
      continue;
    }
    const float epsilon = bn.Float("epsilon", 1e-5f).value_or(1e-5f);
    Tensor new_w, new_b;
    ASSIGN_OR_RETURN(float* wv, AllocateOutputAs<float>(&new_w, DataType::kFp32, w->shape));
    ASSIGN_OR_RETURN(float* bv, AllocateOutputAs<float>(&new_b, DataType::kFp32, {channels}));
    const int64_t per_channel = ElementsOf(*w) / std::max<int64_t>(channels, 1);
    for (int64_t c = 0; c < channels; ++c) {
      const double a = ValuesOf<float>(*scale)[c] / std::sqrt(static_cast<double>(ValuesOf<float>(*var)[c]) + epsilon);
      for (int64_t i = 0; i < per_channel; ++i) {
        wv[c * per_channel + i] = static_cast<float>(ValuesOf<float>(*w)[c * per_channel + i] * a);
      }
      const double old_bias = bias ? ValuesOf<float>(*bias)[c] : 0.0;
      bv[c] = static_cast<float>((old_bias - ValuesOf<float>(*mean)[c]) * a + ValuesOf<float>(*shift)[c]);
    }
    const std::string base = conv.name.empty() ? graph->value(conv.outputs[0]).name : conv.name;
    const ValueId w_id = AddInitializer(graph, base + "_bn_folded_W", std::move(new_w));
    const ValueId b_id = AddInitializer(graph, base + "_bn_folded_B", std::move(new_b));
    Node& folded = graph->nodes[producer];  // AddValue may not move nodes, but take it afresh anyway
    folded.inputs.resize(3, kNoValue);
    folded.inputs[1] = w_id;
    folded.inputs[2] = b_id;
    folded.outputs[0] = graph->nodes[b].outputs[0];
    removed[b] = true;
    ++rewrites;
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
