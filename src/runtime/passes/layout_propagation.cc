// Layout propagation: 4-D FP32 activations stay in oneDNN's blocked layout (nChw8c / nChw16c,
// kernels/dnnl/dnnl_layout.h) from the convolution that makes them through the ops whose oneDNN
// kernels read that layout (activations, pooling, binary ops, further convolutions); an
// inferd.Reorder node turns a value plain where another op reads it. Without this, every Conv
// reorders its input in and its output out: ~190 reorders per MobileNetV3 image, more time than
// the convolutions themselves.
//
// Runs last, after the fusions, and only when the kernels are oneDNN's (the reference kernels
// read plain tensors only).
//
// In a graph with int8 convolutions (passes/qdq_fusion.cc) the layout is NHWC instead, the only
// one oneDNN's fast int8 convolutions take (in nChw16c it offers only its reference): every node
// the pass marks gets `_channels_last` (kernels/dnnl/dnnl_layout.h).
#include <algorithm>
#include <set>

#include "runtime/kernels/int8_attributes.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

// Element-wise ops with a oneDNN kernel (kernels/dnnl/dnnl_eltwise.cc) that keeps the layout.
const std::set<std::string, std::less<>> kUnary = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt",
                                                   "Abs", "Elu", "HardSwish", "Softplus", "Neg", "Reciprocal"};
const std::set<std::string, std::less<>> kPools = {"MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"};
const std::set<std::string, std::less<>> kBinary = {"Add", "Sub", "Mul", "Div", "Max", "Min"};

bool IsFp32Constant(const Graph& graph, ValueId id, size_t max_rank) {
  const Tensor* constant = ConstantOf(graph, id);
  return constant != nullptr && constant->dtype == DataType::kFp32 && constant->shape.size() <= max_rank;
}

bool IsInt8Conv(const Node& node) { return node.op_type == "Conv" && node.Has(kInt8InputScale); }

// A Conv oneDNN runs in 2-D: FP32 weights (or a fused QDQ Conv's int8 ones) known at load, of rank 4.
bool IsBlockableConv(const Graph& graph, const Node& node) {
  if (node.op_type != "Conv" || !IsDefaultDomain(node) || !node.HasInput(0) || !node.HasInput(1)) return false;
  const Tensor* weights = ConstantOf(graph, node.inputs[1]);
  const DataType weights_type = IsInt8Conv(node) ? DataType::kInt8 : DataType::kFp32;
  return weights != nullptr && weights->dtype == weights_type && weights->shape.size() == 4;
}

// Whether `node` can read blocked inputs, given which values are blocked: the inputs it would
// read blocked are returned in *blocked_inputs, and *blocked_output says whether it writes its
// output blocked (never a graph output).
bool ReadsBlocked(const Graph& graph, const Node& node, const std::vector<bool>& blocked,
                  std::vector<int64_t>* blocked_inputs, bool* blocked_output) {
  blocked_inputs->clear();
  auto is_blocked = [&](size_t i) { return node.HasInput(i) && blocked[node.inputs[i]]; };
  if (node.outputs.size() != 1) return false;
  *blocked_output = !IsGraphOutput(graph, node.outputs[0]);
  if (IsBlockableConv(graph, node)) {
    if (is_blocked(0)) blocked_inputs->push_back(0);
    // A fused residual Add reads the last input (kernels/post_ops.h).
    if (node.inputs.size() > 3 && is_blocked(node.inputs.size() - 1)) blocked_inputs->push_back(node.inputs.size() - 1);
    return true;
  }
  // The other ops keep their input's layout, for FP32 only: what an int8 Conv writes quantised
  // (QLinearConv's output read by a MaxPool) goes back to plain for them.
  if (!*blocked_output) return false;
  for (ValueId input : node.inputs) {
    if (input == kNoValue) continue;
    const DataType type = graph.value(input).dtype;
    if (type == DataType::kUint8 || type == DataType::kInt8) return false;
  }
  if (!IsDefaultDomain(node) && !(node.domain == kInferdDomain && node.op_type == "Swish")) return false;
  if (kUnary.count(node.op_type) || node.op_type == "Swish" || kPools.count(node.op_type)) {
    if (node.inputs.size() != 1 || !is_blocked(0)) return false;
    blocked_inputs->push_back(0);
    return true;
  }
  // A channel Concat of blocked values only (kernels/dnnl/dnnl_data_movement.cc).
  if (node.op_type == "Concat" && !node.inputs.empty()) {
    auto axis = node.Int("axis", 0);
    if (!axis.ok() || (*axis != 1 && *axis != -3)) return false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!is_blocked(i)) {
        blocked_inputs->clear();
        return false;
      }
      blocked_inputs->push_back(static_cast<int64_t>(i));
    }
    return true;
  }
  if (kBinary.count(node.op_type) && graph.opset >= 7 && node.inputs.size() == 2) {
    for (size_t i = 0; i < 2; ++i) {
      if (is_blocked(i)) {
        blocked_inputs->push_back(static_cast<int64_t>(i));
      } else if (!node.HasInput(i) || !IsFp32Constant(graph, node.inputs[i], 4)) {
        blocked_inputs->clear();
        return false;
      }
    }
    return !blocked_inputs->empty();
  }
  return false;
}

void SetInts(Node* node, const char* name, std::vector<int64_t> values) {
  Attribute& attribute = node->attributes[name];
  attribute.kind = Attribute::Kind::kInts;
  attribute.ints = std::move(values);
}

void MarkChannelsLast(Node* node) { node->attributes["_channels_last"] = Attribute{.kind = Attribute::Kind::kInt, .i = 1}; }

}  // namespace

StatusOr<int> PropagateLayouts(Graph* graph) {
  std::vector<bool> blocked(graph->values.size(), false);
  std::vector<ValueId> plain_copy(graph->values.size(), kNoValue);
  std::vector<Node> nodes;
  nodes.reserve(graph->nodes.size());
  int blocked_values = 0;
  const bool channels_last = std::any_of(graph->nodes.begin(), graph->nodes.end(), IsInt8Conv);
  for (Node& node : graph->nodes) {
    std::vector<int64_t> blocked_inputs;
    bool blocked_output = false;
    if (ReadsBlocked(*graph, node, blocked, &blocked_inputs, &blocked_output)) {
      // Inputs the op reads plain although they are blocked (a Conv's weights never are).
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const bool read_blocked = std::find(blocked_inputs.begin(), blocked_inputs.end(), static_cast<int64_t>(i)) !=
                                  blocked_inputs.end();
        if (node.HasInput(i) && blocked[node.inputs[i]] && !read_blocked) {
          return Status::Internal(node.Describe() + " would read a blocked input as plain");
        }
      }
      if (!blocked_inputs.empty()) SetInts(&node, "_blocked_inputs", blocked_inputs);
      if (blocked_output) {
        SetInts(&node, "_blocked_outputs", {0});
        blocked[node.outputs[0]] = true;
        ++blocked_values;
      }
      if (channels_last && (blocked_output || !blocked_inputs.empty())) MarkChannelsLast(&node);
      nodes.push_back(std::move(node));
      continue;
    }
    // This op reads plain tensors: each blocked input gets (or shares) a reorder to plain.
    for (ValueId& input : node.inputs) {
      if (input == kNoValue || !blocked[input]) continue;
      if (plain_copy[input] == kNoValue) {
        ValueInfo info = graph->value(input);
        info.name += "/plain";
        const ValueId copy = graph->AddValue(std::move(info));
        blocked.resize(graph->values.size(), false);
        plain_copy.resize(graph->values.size(), kNoValue);
        plain_copy[input] = copy;
        Node reorder;
        reorder.name = graph->value(input).name + "/to_plain";
        reorder.op_type = "Reorder";
        reorder.domain = std::string(kInferdDomain);
        reorder.inputs = {input};
        reorder.outputs = {copy};
        Attribute to;
        to.kind = Attribute::Kind::kString;
        to.s = "plain";
        reorder.attributes["to"] = to;
        if (channels_last) MarkChannelsLast(&reorder);
        nodes.push_back(std::move(reorder));
      }
      input = plain_copy[input];
    }
    nodes.push_back(std::move(node));
  }
  graph->nodes = std::move(nodes);
  return blocked_values;
}

}  // namespace inferd::runtime
