// Activations that exporters spell as two ops become the one op oneDNN runs (and can fuse into a
// convolution as a post-op):
//   Mul(x, Sigmoid(x))                    -> inferd.Swish(x)   (SiLU: EfficientNet, YOLO)
//   Mul(x, HardSigmoid(x, 1/6, 1/2))      -> HardSwish(x)      (from opset 14, where HardSwish exists)
// Only when the Sigmoid's output has that one reader and is not a graph output.
#include <cmath>

#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

bool IsDefaultDomain(const Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

bool IsHardSwishGate(const Node& node) {
  if (node.op_type != "HardSigmoid") return false;
  auto alpha = node.Float("alpha", 0.2f);
  auto beta = node.Float("beta", 0.5f);
  return alpha.ok() && beta.ok() && std::fabs(*alpha - 1.0f / 6) < 1e-6f && std::fabs(*beta - 0.5f) < 1e-6f;
}

}  // namespace

StatusOr<int> RewriteActivations(Graph* graph) {
  if (graph->opset < 7) return 0;  // Mul's legacy broadcast attributes
  const auto consumers = ConsumersOf(*graph);
  const auto producers = ProducersOf(*graph);
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t m = 0; m < graph->nodes.size(); ++m) {
    const Node& mul = graph->nodes[m];
    if (mul.op_type != "Mul" || !IsDefaultDomain(mul) || mul.inputs.size() != 2 || !mul.HasInput(0) || !mul.HasInput(1)) continue;
    for (int side = 0; side < 2; ++side) {
      const ValueId gate = mul.inputs[side], x = mul.inputs[1 - side];
      const int producer = producers[gate];
      if (producer < 0 || consumers[gate].size() != 1 || IsGraphOutput(*graph, gate)) continue;
      Node& activation = graph->nodes[producer];
      if (!IsDefaultDomain(activation) || activation.inputs.size() != 1 || activation.inputs[0] != x) continue;
      if (activation.op_type == "Sigmoid") {
        activation.op_type = "Swish";
        activation.domain = std::string(kInferdDomain);
      } else if (IsHardSwishGate(activation) && graph->opset >= 14) {
        activation.op_type = "HardSwish";
        activation.attributes.clear();
      } else {
        continue;
      }
      // The activation node now writes the Mul's output; everything reading that comes after the
      // Mul, so after the activation too.
      activation.outputs[0] = mul.outputs[0];
      removed[m] = true;
      ++rewrites;
      break;
    }
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
