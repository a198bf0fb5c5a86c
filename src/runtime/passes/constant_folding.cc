// Nodes whose inputs are all constants run once, at load, on the reference kernels; their outputs
// become initializers. Random ops are never folded, and neither are results too large to be worth
// keeping (a ConstantOfShape of a huge shape stays a node).
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

constexpr int64_t kMaxFoldedBytes = 64 << 20;

bool IsRandom(const std::string& op) { return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial"; }

}  // namespace

std::optional<std::vector<Tensor>> EvaluateConstantNode(const Graph& graph, const Node& node) {
  if (IsRandom(node.op_type)) return std::nullopt;
  std::vector<const Tensor*> inputs;
  for (ValueId id : node.inputs) {
    const Tensor* constant = id == kNoValue ? nullptr : ConstantOf(graph, id);
    if (id != kNoValue && constant == nullptr) return std::nullopt;
    inputs.push_back(constant);
  }
  const KernelFactory* factory = KernelRegistry::Reference().Find(node.op_type, node.domain, graph.opset);
  if (factory == nullptr) return std::nullopt;  // the session reports it
  auto kernel = (*factory)(node, graph.opset);
  if (!kernel.ok()) return std::nullopt;
  std::vector<Tensor> outputs(node.outputs.size());
  if (!(*kernel)->Run(inputs, outputs).ok()) return std::nullopt;  // leave the error to run time
  for (const Tensor& t : outputs) {
    // Sequences are no initializers.
    if (t.byte_size > static_cast<size_t>(kMaxFoldedBytes) || t.sequence != nullptr) return std::nullopt;
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] != kNoValue) outputs[o].name = graph.value(node.outputs[o]).name;
  }
  return outputs;
}

StatusOr<int> FoldConstants(Graph* graph) {
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    auto outputs = EvaluateConstantNode(*graph, node);
    if (!outputs) continue;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] != kNoValue) graph->initializers[node.outputs[o]] = std::move((*outputs)[o]);
    }
    removed[n] = true;
    ++rewrites;
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
