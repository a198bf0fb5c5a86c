// Shape arithmetic that the inputs' symbolic dims do not reach becomes constants at load
// (ir/shape_inference.h): exporters compute reshape targets, head sizes and attention scales from
// Shape ops on every request. An output folds when every element of it is a number; what depends
// on the batch dim stays. Then constant folding carries the new constants on (Cast, Pow, Sqrt...).
//
// Inferred shapes are also written into the graph for values the model gave none, for the passes
// after this one (attention fusion reads the softmax's rank).
#include "runtime/ir/shape_inference.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

// The constant for `contents`, or nullopt unless every element is a number.
std::optional<Tensor> ConstantFor(const std::vector<SymbolicInt>& contents, DataType type, const SymbolicShape& shape) {
  if (type != DataType::kInt64 && type != DataType::kInt32) return std::nullopt;
  Shape dims;
  for (const Dim& d : shape) dims.push_back(d.value);
  Tensor tensor;
  auto fill = [&](auto* data) {
    for (size_t i = 0; i < contents.size(); ++i) data[i] = static_cast<std::remove_pointer_t<decltype(data)>>(*contents[i].number);
  };
  for (const SymbolicInt& e : contents) {
    if (!e.number) return std::nullopt;
  }
  if (type == DataType::kInt64) {
    fill(AllocateOutputAs<int64_t>(&tensor, type, dims).value());
  } else {
    fill(AllocateOutputAs<int32_t>(&tensor, type, dims).value());
  }
  return tensor;
}

}  // namespace

StatusOr<int> FoldShapes(Graph* graph) {
  // One sweep in graph order: a node whose inputs are all constant by now (a Pad's pads computed
  // from a folded height) is evaluated, so the nodes after it see its output as known.
  ShapeInference inference(*graph);
  const InferredShapes& inferred = inference.result();
  std::vector<bool> removed(graph->nodes.size(), false);
  int folded = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    std::optional<std::vector<Tensor>> constants;
    if (!node.inputs.empty()) constants = EvaluateConstantNode(*graph, node);
    if (!constants) {
      inference.Infer(node);
      const ValueId out = node.outputs.empty() ? kNoValue : node.outputs[0];
      if (IsDefaultDomain(node) && node.outputs.size() == 1 && out != kNoValue && inferred.contents[out] &&
          inferred.shapes[out]) {
        if (auto constant = ConstantFor(*inferred.contents[out], inferred.contents_type[out], *inferred.shapes[out])) {
          constant->name = graph->value(out).name;
          constants = std::vector<Tensor>{std::move(*constant)};
        }
      }
    }
    if (!constants) continue;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      inference.AddConstant(node.outputs[o], (*constants)[o]);
      graph->initializers[node.outputs[o]] = std::move((*constants)[o]);
    }
    removed[n] = true;
    ++folded;
  }
  // Shapes the model did not give, for the passes after this one.
  for (size_t id = 0; id < graph->values.size(); ++id) {
    const auto value = static_cast<ValueId>(id);
    if (inferred.shapes[id] && !IsGraphOutput(*graph, value) && !graph->initializers.count(value)) {
      graph->values[id].shape = inferred.shapes[id];
    }
  }
  EraseNodes(graph, removed);
  return folded + EraseDeadNodes(graph);
}

}  // namespace inferd::runtime
