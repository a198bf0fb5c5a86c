// Scaled dot-product attention as exporters spell it, one op (inferd.Attention, kernels/attention.h):
//   scores = MatMul(Q, K)           with a scalar Mul/Div on Q, on K or on the scores (any of them)
//   scores = Add(scores, mask)      optional
//   out    = MatMul(Softmax(scores, last axis), V)
// Transposes that feed Q, K or V, or read the output, are absorbed as perm attributes: the fused
// kernel reads and writes through strides instead (PyTorch's MultiheadAttention puts five around
// every attention). Every intermediate must have no other reader and not be a graph output.
#include <algorithm>
#include <optional>

#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

class AttentionMatcher {
 public:
  explicit AttentionMatcher(const Graph& graph)
      : graph_(graph), consumers_(ConsumersOf(graph)), producers_(ProducersOf(graph)) {}

  struct Match {
    std::vector<size_t> nodes;
    ValueId q = kNoValue, k = kNoValue, v = kNoValue, mask = kNoValue, output = kNoValue;
    float scale = 1;
    std::vector<int64_t> q_perm, k_perm, v_perm, out_perm;
  };

  // For a Softmax node: the attention it is the heart of, if it is one.
  std::optional<Match> From(size_t softmax) const {
    const Node& node = graph_.nodes[softmax];
    if (node.op_type != "Softmax" || !IsDefaultDomain(node) || node.inputs.size() != 1 || !OverLastAxis(node)) {
      return std::nullopt;
    }
    Match m;
    m.nodes.push_back(softmax);
    // Backwards from the softmax: the mask, a scale, the first MatMul.
    ValueId scores = node.inputs[0];
    if (const Node* add = SoleProducer(scores, "Add"); add != nullptr && add->inputs.size() == 2) {
      for (int side = 0; side < 2 && m.mask == kNoValue; ++side) {
        if (ProducedBy(PeelScale(add->inputs[side], nullptr, nullptr), "MatMul")) {
          m.mask = add->inputs[1 - side];
          m.nodes.push_back(Index(scores));
          scores = add->inputs[side];
        }
      }
      if (m.mask == kNoValue) return std::nullopt;
    }
    scores = PeelScale(scores, &m.scale, &m.nodes);
    const Node* first = SoleProducer(scores, "MatMul");
    if (first == nullptr || first->inputs.size() != 2) return std::nullopt;
    m.nodes.push_back(Index(scores));
    m.q = Unpermuted(PeelScale(first->inputs[0], &m.scale, &m.nodes), &m.q_perm, &m.nodes);
    m.k = Unpermuted(PeelScale(first->inputs[1], &m.scale, &m.nodes), &m.k_perm, &m.nodes);
    // Forwards: the second MatMul reads the probabilities as its left operand.
    const ValueId probabilities = node.outputs[0];
    if (!OnlyReader(probabilities)) return std::nullopt;
    const size_t second_index = consumers_[probabilities][0];
    const Node& second = graph_.nodes[second_index];
    if (second.op_type != "MatMul" || !IsDefaultDomain(second) || second.inputs.size() != 2 ||
        second.inputs[0] != probabilities || second.inputs[1] == probabilities) {
      return std::nullopt;
    }
    m.nodes.push_back(second_index);
    m.v = Unpermuted(second.inputs[1], &m.v_perm, &m.nodes);
    m.output = second.outputs[0];
    if (OnlyReader(m.output)) {
      const size_t reader = consumers_[m.output][0];
      std::vector<int64_t> perm;
      if (PermOf(graph_.nodes[reader], &perm)) {
        m.out_perm = perm;
        m.output = graph_.nodes[reader].outputs[0];
        m.nodes.push_back(reader);
      }
    }
    return m;
  }

 private:
  bool OnlyReader(ValueId value) const { return consumers_[value].size() == 1 && !IsGraphOutput(graph_, value); }
  size_t Index(ValueId value) const { return static_cast<size_t>(producers_[value]); }
  bool ProducedBy(ValueId value, const char* op) const {
    const int p = producers_[value];
    return p >= 0 && graph_.nodes[p].op_type == op && IsDefaultDomain(graph_.nodes[p]);
  }
  // The node of type `op` that produces `value`, which nothing else reads.
  const Node* SoleProducer(ValueId value, const char* op) const {
    return ProducedBy(value, op) && OnlyReader(value) ? &graph_.nodes[producers_[value]] : nullptr;
  }

  // Softmax over the last axis: -1, or rank - 1 where the rank is known. Before opset 13 the input
  // is coerced to 2-D at the axis, the same thing for the last one.
  bool OverLastAxis(const Node& node) const {
    auto axis = node.Int("axis", graph_.opset < 13 ? 1 : -1);
    if (!axis.ok()) return false;
    if (*axis == -1) return true;
    const auto& shape = graph_.value(node.inputs[0]).shape;
    return shape && *axis == static_cast<int64_t>(shape->size()) - 1;
  }

  // Through a Mul or Div by a scalar constant that only this path reads: its other operand, the
  // factor folded into *scale and the node recorded (both nullptr: only look).
  ValueId PeelScale(ValueId value, float* scale, std::vector<size_t>* nodes) const {
    const int p = producers_[value];
    if (p < 0 || !OnlyReader(value)) return value;
    const Node& node = graph_.nodes[p];
    if (!IsDefaultDomain(node) || (node.op_type != "Mul" && node.op_type != "Div")) return value;
    ValueId other = kNoValue;
    float constant = 0;
    if (!SplitScalar(graph_, node, &other, &constant) || constant == 0) return value;
    if (node.op_type == "Div" && node.inputs[0] != other) return value;  // c / x is no scale
    if (scale != nullptr) {
      *scale *= node.op_type == "Div" ? 1 / constant : constant;
      nodes->push_back(static_cast<size_t>(p));
    }
    return other;
  }

  bool PermOf(const Node& node, std::vector<int64_t>* perm) const {
    if (node.op_type != "Transpose" || !IsDefaultDomain(node) || !node.Has("perm")) return false;
    auto value = node.Ints("perm");
    if (!value.ok() || value->empty()) return false;
    *perm = *value;
    return true;
  }
  // Through a Transpose (with an explicit perm) that only this path reads.
  ValueId Unpermuted(ValueId value, std::vector<int64_t>* perm, std::vector<size_t>* nodes) const {
    const int p = producers_[value];
    if (p < 0 || !OnlyReader(value) || !PermOf(graph_.nodes[p], perm)) return value;
    nodes->push_back(static_cast<size_t>(p));
    return graph_.nodes[p].inputs[0];
  }

  const Graph& graph_;
  std::vector<std::vector<size_t>> consumers_;
  std::vector<int> producers_;
};

Attribute IntsAttribute(std::vector<int64_t> values) {
  Attribute attribute;
  attribute.kind = Attribute::Kind::kInts;
  attribute.ints = std::move(values);
  return attribute;
}

}  // namespace

StatusOr<int> FuseAttention(Graph* graph) {
  if (graph->opset < 7) return 0;  // Add/Mul's legacy broadcast attributes
  const AttentionMatcher matcher(*graph);
  Fusions fusions(*graph);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    auto match = matcher.From(n);
    if (!match) continue;
    Node attention;
    attention.name = graph->nodes[n].name + "/attention";
    attention.op_type = "Attention";
    attention.domain = std::string(kInferdDomain);
    attention.inputs = {match->q, match->k, match->v};
    if (match->mask != kNoValue) attention.inputs.push_back(match->mask);
    attention.outputs = {match->output};
    Attribute scale;
    scale.kind = Attribute::Kind::kFloat;
    scale.f = match->scale;
    attention.attributes["scale"] = scale;
    const std::pair<const char*, std::vector<int64_t>*> perms[] = {
        {"q_perm", &match->q_perm}, {"k_perm", &match->k_perm}, {"v_perm", &match->v_perm}, {"out_perm", &match->out_perm}};
    for (const auto& [name, perm] : perms) {
      if (!perm->empty()) attention.attributes[name] = IntsAttribute(*perm);
    }
    fusions.Add(match->nodes, std::move(attention));
  }
  return fusions.Apply(graph);
}

}  // namespace inferd::runtime
