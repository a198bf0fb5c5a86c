#include "runtime/passes/bf16_outputs.h"

#include <algorithm>

#include "runtime/kernels/post_ops.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/precision.h"

namespace inferd::runtime {
namespace {

// A dense (one group) bf16 convolution. Depthwise layers are left out on both sides: memory-bound,
// they gain nothing from bf16 arithmetic, and reading or writing bf16 takes our fp32 kernels out of
// their tuning; with them in, mobilenet_v3_large's bf16 run took 1.3x the time (docs/BENCHMARKS.md).
bool IsDenseBf16Convolution(const Node& node) {
  auto precision = node.String(kPrecisionAttribute, "fp32");
  auto group = node.Int("group", 1);
  return node.domain.empty() && node.op_type == "Conv" && precision.ok() && *precision == "bf16" &&
         group.ok() && *group == 1;
}

}  // namespace

StatusOr<int> KeepBf16BetweenConvolutions(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  int marked = 0;
  for (Node& producer : graph->nodes) {
    if (!IsDenseBf16Convolution(producer) || producer.outputs.size() != 1) continue;
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(producer));
    const bool swish = std::any_of(post_ops.begin(), post_ops.end(),
                                   [](const PostOp& op) { return op.kind == PostOp::Kind::kSwish; });
    const ValueId y = producer.outputs[0];
    if (HasAdd(post_ops) || swish || IsGraphOutput(*graph, y) || consumers[y].empty()) continue;
    const bool only_bf16_data_readers = std::all_of(consumers[y].begin(), consumers[y].end(), [&](size_t c) {
      const Node& reader = graph->nodes[c];
      return IsDenseBf16Convolution(reader) && reader.inputs[0] == y &&
             std::count(reader.inputs.begin(), reader.inputs.end(), y) == 1;
    });
    if (!only_bf16_data_readers) continue;
    producer.attributes[kBf16OutputAttribute] = Attribute{.kind = Attribute::Kind::kInt, .i = 1};
    graph->values[static_cast<size_t>(y)].dtype = DataType::kBf16;
    ++marked;
  }
  return marked;
}

}  // namespace inferd::runtime
