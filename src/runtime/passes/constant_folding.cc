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

StatusOr<int> FoldConstants(Graph* graph) {
  const KernelRegistry& registry = KernelRegistry::Reference();
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    if (IsRandom(node.op_type)) continue;
    bool all_constant = true;
    std::vector<const Tensor*> inputs;
    for (ValueId id : node.inputs) {
      const Tensor* constant = id == kNoValue ? nullptr : ConstantOf(*graph, id);
      if (id != kNoValue && constant == nullptr) all_constant = false;
      inputs.push_back(constant);
    }
    if (!all_constant) continue;
    const KernelFactory* factory = registry.Find(node.op_type, node.domain, graph->opset);
    if (factory == nullptr) continue;  // the session reports it
    auto kernel = (*factory)(node, graph->opset);
    if (!kernel.ok()) continue;
    std::vector<Tensor> outputs(node.outputs.size());
    if (!(*kernel)->Run(inputs, outputs).ok()) continue;  // leave the error to run time
    bool small = true;
    for (const Tensor& t : outputs) small &= t.byte_size <= static_cast<size_t>(kMaxFoldedBytes);
    if (!small) continue;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      outputs[o].name = graph->value(node.outputs[o]).name;
      graph->initializers[node.outputs[o]] = std::move(outputs[o]);
    }
    removed[n] = true;
    ++rewrites;
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
