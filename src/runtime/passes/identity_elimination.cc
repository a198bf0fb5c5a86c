// Identity and inference-mode Dropout pass their input through: readers of their output read the
// input instead. Kept when their output is a graph output (its name must survive).
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {

namespace {

// A Dropout is the identity unless a training_mode input is (or may be) true with a non-zero ratio.
bool DropoutPassesThrough(const Graph& graph, const Node& node) {
  if (!node.HasInput(2)) return true;
  const Tensor* training = ConstantOf(graph, node.inputs[2]);
  if (training == nullptr || training->dtype != DataType::kBool) return false;
  if (training->byte_size == 0 || !*training->data.get()) return true;
  const Tensor* ratio = node.HasInput(1) ? ConstantOf(graph, node.inputs[1]) : nullptr;
  if (ratio == nullptr) return false;
  if (ratio->dtype == DataType::kFp32 && ratio->byte_size == sizeof(float)) {
    return *reinterpret_cast<const float*>(ratio->data.get()) == 0.0f;
  }
  return false;
}

}  // namespace

StatusOr<int> EliminateIdentities(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    const bool passes_through = node.op_type == "Identity" ||
                                (node.op_type == "Dropout" && DropoutPassesThrough(*graph, node) &&
                                 (node.outputs.size() < 2 || node.outputs[1] == kNoValue ||
                                  consumers[node.outputs[1]].empty()));
    if (!passes_through || !node.HasInput(0) || node.outputs.empty()) continue;
    const ValueId in = node.inputs[0], out = node.outputs[0];
    if (IsGraphOutput(*graph, out) || (node.outputs.size() > 1 && node.outputs[1] != kNoValue && IsGraphOutput(*graph, node.outputs[1]))) {
      continue;
    }
    ReplaceUses(graph, out, in);
    removed[n] = true;
    ++rewrites;
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
