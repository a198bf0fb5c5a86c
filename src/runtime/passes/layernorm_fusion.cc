// LayerNorm as exporters before opset 17 spell it, one op again:
//   mean = ReduceMean(x, axes=[-1]); d = x - mean; var = ReduceMean(d^2, axes=[-1])
//   y = d / Sqrt(var + epsilon) * gamma + beta
// -> LayerNormalization(x, gamma, beta, axis=-1, epsilon) (ONNX's from opset 17, inferd's own op
// below). d^2 may be Pow(d, 2) or Mul(d, d); gamma and beta must be constants (they give the
// normalized size) and every intermediate must have no other reader.
#include <algorithm>

#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

class LayerNormMatcher {
 public:
  explicit LayerNormMatcher(const Graph& graph)
      : graph_(graph), consumers_(ConsumersOf(graph)) {}

  struct Match {
    std::vector<size_t> nodes;
    ValueId x = kNoValue, gamma = kNoValue, beta = kNoValue, output = kNoValue;
    float epsilon = 0;
  };

  // For a ReduceMean node: the LayerNorm it starts, if it does.
  std::optional<Match> From(size_t first) const {
    Match m;
    const Node& mean = graph_.nodes[first];
    if (!IsLastAxisMean(mean)) return std::nullopt;
    m.x = mean.inputs[0];
    size_t sub = 0;
    if (!Sole(mean.outputs[0], "Sub", &sub) || graph_.nodes[sub].inputs != std::vector<ValueId>{m.x, mean.outputs[0]}) {
      return std::nullopt;
    }
    const ValueId centered = graph_.nodes[sub].outputs[0];
    // `centered` has two readers: the square (Mul(d, d) reads it twice), and the division.
    std::vector<size_t> readers = consumers_[centered];
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (readers.size() != 2 || IsGraphOutput(graph_, centered)) return std::nullopt;
    size_t square = 0, divide = 0;
    for (size_t reader : readers) {
      const Node& node = graph_.nodes[reader];
      float exponent = 0;
      ValueId base = kNoValue;
      if (node.op_type == "Div" && node.inputs[0] == centered) {
        divide = reader;
      } else if ((node.op_type == "Pow" && SplitScalar(graph_, node, &base, &exponent) && node.inputs[0] == centered &&
                  exponent == 2) ||
                 (node.op_type == "Mul" && node.inputs.size() == 2 && node.inputs[0] == centered &&
                  node.inputs[1] == centered)) {
        square = reader;
      }
    }
    if (square == 0 || divide == 0) return std::nullopt;
    size_t variance = 0, add_epsilon = 0, root = 0;
    if (!Sole(graph_.nodes[square].outputs[0], "ReduceMean", &variance) || !IsLastAxisMean(graph_.nodes[variance]) ||
        !Sole(graph_.nodes[variance].outputs[0], "Add", &add_epsilon)) {
      return std::nullopt;
    }
    ValueId variance_value = kNoValue;
    if (!SplitScalar(graph_, graph_.nodes[add_epsilon], &variance_value, &m.epsilon) || m.epsilon < 0 ||
        !Sole(graph_.nodes[add_epsilon].outputs[0], "Sqrt", &root)) {
      return std::nullopt;
    }
    size_t reader = 0;
    if (!Sole(graph_.nodes[root].outputs[0], "Div", &reader) || reader != divide) return std::nullopt;
    size_t scale = 0, shift = 0;
    if (!Sole(graph_.nodes[divide].outputs[0], "Mul", &scale) ||
        !ConstantOperand(graph_.nodes[scale], graph_.nodes[divide].outputs[0], &m.gamma) ||
        !Sole(graph_.nodes[scale].outputs[0], "Add", &shift) ||
        !ConstantOperand(graph_.nodes[shift], graph_.nodes[scale].outputs[0], &m.beta)) {
      return std::nullopt;
    }
    m.nodes = {first, sub, square, variance, add_epsilon, root, divide, scale, shift};
    m.output = graph_.nodes[shift].outputs[0];
    return m;
  }

 private:
  bool IsLastAxisMean(const Node& node) const {
    if (node.op_type != "ReduceMean" || !IsDefaultDomain(node) || node.inputs.size() != 1) return false;
    auto axes = node.Ints("axes");
    auto keepdims = node.Int("keepdims", 1);
    return axes.ok() && keepdims.ok() && *keepdims == 1 && *axes == std::vector<int64_t>{-1};
  }
  bool Sole(ValueId value, const char* op, size_t* reader) const {
    if (consumers_[value].size() != 1 || IsGraphOutput(graph_, value)) return false;
    *reader = consumers_[value][0];
    const Node& node = graph_.nodes[*reader];
    return node.op_type == op && IsDefaultDomain(node);
  }
  // A binary node reading `value` and a 1-D FP32 constant: the constant.
  bool ConstantOperand(const Node& node, ValueId value, ValueId* constant) const {
    if (node.inputs.size() != 2) return false;
    const ValueId other = node.inputs[0] == value ? node.inputs[1] : node.inputs[1] == value ? node.inputs[0] : kNoValue;
    const Tensor* tensor = other == kNoValue ? nullptr : ConstantOf(graph_, other);
    if (tensor == nullptr || tensor->dtype != DataType::kFp32 || tensor->shape.size() != 1) return false;
    *constant = other;
    return true;
  }

  const Graph& graph_;
  std::vector<std::vector<size_t>> consumers_;
};

}  // namespace

StatusOr<int> FuseLayerNorm(Graph* graph) {
  const LayerNormMatcher matcher(*graph);
  Fusions fusions(*graph);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    auto match = matcher.From(n);
    if (!match || ConstantOf(*graph, match->gamma)->shape != ConstantOf(*graph, match->beta)->shape) continue;
    Node norm;
    norm.name = graph->nodes[n].name + "/layernorm";
    norm.op_type = "LayerNormalization";
    // ONNX's op from opset 17; the same op in inferd's domain for older models.
    if (graph->opset < 17) norm.domain = std::string(kInferdDomain);
    norm.inputs = {match->x, match->gamma, match->beta};
    norm.outputs = {match->output};
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    norm.attributes["axis"] = axis;
    Attribute epsilon;
    epsilon.kind = Attribute::Kind::kFloat;
    epsilon.f = match->epsilon;
    norm.attributes["epsilon"] = epsilon;
    fusions.Add(match->nodes, std::move(norm));
  }
  return fusions.Apply(graph);
}

}  // namespace inferd::runtime
