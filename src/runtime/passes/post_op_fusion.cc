// Fuses what follows a Conv, Gemm or MatMul into it as post-ops (kernels/post_ops.h), so that
// oneDNN applies them while the output is still in cache:
//   FuseResidualAdd:  Y = Add(op(...), R) or Add(R, op(...)) -> op(..., R) with post-op Add
//   FuseActivations:  Y = Relu/LeakyRelu/Clip/Sigmoid/Tanh/HardSwish/Elu(op(...)) -> op with post-op
// Only when the op's output has that one reader and is not a graph output.
#include "runtime/kernels/post_ops.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

bool CanCarryPostOps(const Node& node) {
  return node.op_type == "Conv" || node.op_type == "Gemm" || node.op_type == "MatMul";
}

// Where the residual goes: after the op's own inputs (optional ones padded as absent).
size_t OwnInputCount(const Node& node) { return node.op_type == "MatMul" ? 2 : 3; }

void AppendPostOp(Node* node, const std::string& name, float alpha, float beta) {
  Attribute& names = node->attributes["_post_ops"];
  names.kind = Attribute::Kind::kStrings;
  names.strings.push_back(name);
  Attribute& alphas = node->attributes["_post_alpha"];
  alphas.kind = Attribute::Kind::kFloats;
  alphas.floats.push_back(alpha);
  Attribute& betas = node->attributes["_post_beta"];
  betas.kind = Attribute::Kind::kFloats;
  betas.floats.push_back(beta);
}

// The producer of `value` if it can take a post-op reading `value`: a Conv/Gemm/MatMul whose only
// reader is the node at `reader`.
int FusibleProducer(const Graph& graph, const std::vector<int>& producers,
                    const std::vector<std::vector<size_t>>& consumers, ValueId value) {
  if (value == kNoValue) return -1;
  const int producer = producers[value];
  if (producer < 0 || consumers[value].size() != 1 || IsGraphOutput(graph, value)) return -1;
  const Node& node = graph.nodes[producer];
  if (!CanCarryPostOps(node) || node.outputs.size() != 1) return -1;
  return producer;
}

}  // namespace

StatusOr<int> FuseResidualAdd(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  const auto producers = ProducersOf(*graph);
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t a = 0; a < graph->nodes.size(); ++a) {
    const Node& add = graph->nodes[a];
    if (add.op_type != "Add" || add.inputs.size() != 2 || !add.HasInput(0) || !add.HasInput(1)) continue;
    if (graph->opset < 7) continue;  // legacy broadcast attributes
    for (int side = 0; side < 2; ++side) {
      const int producer = FusibleProducer(*graph, producers, consumers, add.inputs[side]);
      if (producer < 0 || removed[producer]) continue;
      const ValueId residual = add.inputs[1 - side];
      // The residual must exist before the op runs (it may be computed between the op and the Add).
      if (producers[residual] >= producer) continue;
      Node& op = graph->nodes[producer];
      if (ReadPostOps(op).value_or(std::vector<PostOp>{}).size() > 0) continue;  // Add must come first
      if (graph->value(residual).dtype != DataType::kInvalid && graph->value(residual).dtype != DataType::kFp32) continue;
      op.inputs.resize(OwnInputCount(op), kNoValue);
      op.inputs.push_back(residual);
      AppendPostOp(&op, "Add", 0, 0);
      op.outputs[0] = add.outputs[0];
      removed[a] = true;
      ++rewrites;
      break;
    }
  }
  EraseNodes(graph, removed);
  return rewrites;
}

StatusOr<int> FuseActivations(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  const auto producers = ProducersOf(*graph);
  std::vector<bool> removed(graph->nodes.size(), false);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& activation = graph->nodes[n];
    if (activation.inputs.empty() || activation.outputs.size() != 1) continue;
    const Tensor* clip_min = activation.HasInput(1) ? ConstantOf(*graph, activation.inputs[1]) : nullptr;
    const Tensor* clip_max = activation.HasInput(2) ? ConstantOf(*graph, activation.inputs[2]) : nullptr;
    if ((activation.HasInput(1) && !clip_min) || (activation.HasInput(2) && !clip_max)) continue;
    std::optional<PostOp> post_op = PostOpForActivation(activation, clip_min, clip_max);
    if (!post_op) continue;
    const int producer = FusibleProducer(*graph, producers, consumers, activation.inputs[0]);
    if (producer < 0) continue;
    Node& op = graph->nodes[producer];
    AppendPostOp(&op, PostOpName(post_op->kind), post_op->alpha, post_op->beta);
    op.outputs[0] = activation.outputs[0];
    removed[n] = true;
    ++rewrites;
  }
  EraseNodes(graph, removed);
  return rewrites;
}

}  // namespace inferd::runtime
