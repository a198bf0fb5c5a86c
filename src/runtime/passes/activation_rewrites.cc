// Activations that exporters spell as two ops become the one op oneDNN runs (and can fuse into a
// convolution as a post-op):
//   Mul(x, Sigmoid(x))                    -> inferd.Swish(x)   (SiLU: EfficientNet, YOLO)
//   Mul(x, HardSigmoid(x, 1/6, 1/2))      -> HardSwish(x)      (from opset 14, where HardSwish exists)
//   x * 0.5 * (1 + Erf(x / sqrt(2)))      -> inferd.Gelu(x)    (exact GELU as PyTorch exports it,
//                                                                 the 0.5 on either side)
// Only when every intermediate has that one reader and is not a graph output.
#include <algorithm>
#include <cmath>

#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

bool IsHardSwishGate(const Node& node) {
  if (node.op_type != "HardSigmoid") return false;
  auto alpha = node.Float("alpha", 0.2f);
  auto beta = node.Float("beta", 0.5f);
  return alpha.ok() && beta.ok() && std::fabs(*alpha - 1.0f / 6) < 1e-6f && std::fabs(*beta - 0.5f) < 1e-6f;
}

class GeluMatcher {
 public:
  explicit GeluMatcher(const Graph& graph)
      : graph_(graph), consumers_(ConsumersOf(graph)), producers_(ProducersOf(graph)) {}

  // For an Erf node: the nodes of the GELU it is the heart of (to remove), its input x and its
  // output; false if the Erf is not part of one.
  bool Match(size_t erf, std::vector<size_t>* nodes, ValueId* x, ValueId* output) const {
    const Node& e = graph_.nodes[erf];
    if (e.op_type != "Erf" || !IsDefaultDomain(e) || e.inputs.size() != 1) return false;
    // x / sqrt(2), or x * (1 / sqrt(2))
    const int scale = producers_[e.inputs[0]];
    if (scale < 0 || !OnlyReader(e.inputs[0])) return false;
    const Node& scaling = graph_.nodes[scale];
    float c = 0;
    if (!SplitScalar(graph_, scaling, x, &c)) return false;
    const bool divides = scaling.op_type == "Div" && scaling.inputs[1] != *x && Near(c, std::sqrt(2.0f));
    const bool multiplies = scaling.op_type == "Mul" && Near(c, 1 / std::sqrt(2.0f));
    if (!divides && !multiplies) return false;
    // 1 + erf
    size_t add = 0;
    ValueId erf_value = kNoValue;
    if (!SoleReader(e.outputs[0], "Add", &add) || !SplitScalar(graph_, graph_.nodes[add], &erf_value, &c) || !Near(c, 1)) {
      return false;
    }
    // x * (1 + erf) * 0.5, in either order.
    size_t first = 0, second = 0;
    if (!SoleReader(graph_.nodes[add].outputs[0], "Mul", &first)) return false;
    const Node& m1 = graph_.nodes[first];
    ValueId other = m1.inputs[0] == graph_.nodes[add].outputs[0] ? m1.inputs[1] : m1.inputs[0];
    if (other == *x) {
      ValueId half_input = kNoValue;
      if (!SoleReader(m1.outputs[0], "Mul", &second) || !SplitScalar(graph_, graph_.nodes[second], &half_input, &c) ||
          !Near(c, 0.5f)) {
        return false;
      }
    } else {
      // (x * 0.5) * (1 + erf)
      const int half = producers_[other];
      ValueId half_input = kNoValue;
      if (half < 0 || !OnlyReader(other) || graph_.nodes[half].op_type != "Mul" ||
          !SplitScalar(graph_, graph_.nodes[half], &half_input, &c) || half_input != *x || !Near(c, 0.5f)) {
        return false;
      }
      second = first;
      first = static_cast<size_t>(half);
    }
    *nodes = {static_cast<size_t>(scale), erf, add, first, second};
    *output = graph_.nodes[second].outputs[0];
    return true;
  }

 private:
  bool OnlyReader(ValueId value) const { return consumers_[value].size() == 1 && !IsGraphOutput(graph_, value); }
  bool SoleReader(ValueId value, const char* op, size_t* reader) const {
    if (!OnlyReader(value)) return false;
    *reader = consumers_[value][0];
    const Node& node = graph_.nodes[*reader];
    return node.op_type == op && IsDefaultDomain(node);
  }

  const Graph& graph_;
  std::vector<std::vector<size_t>> consumers_;
  std::vector<int> producers_;
};

int RewriteGelu(Graph* graph) {
  const GeluMatcher matcher(*graph);
  Fusions fusions(*graph);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    std::vector<size_t> nodes;
    ValueId x = kNoValue, output = kNoValue;
    if (!matcher.Match(n, &nodes, &x, &output)) continue;
    Node gelu;
    gelu.name = graph->nodes[n].name + "/gelu";
    gelu.op_type = "Gelu";
    gelu.domain = std::string(kInferdDomain);
    gelu.inputs = {x};
    gelu.outputs = {output};
    fusions.Add(nodes, std::move(gelu));
  }
  return fusions.Apply(graph);
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
  return rewrites + RewriteGelu(graph);
}

}  // namespace inferd::runtime
