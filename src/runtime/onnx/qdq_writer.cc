#include "runtime/onnx/qdq_writer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/onnx/onnx_import.h"

namespace inferd::runtime {
namespace {

bool IsDefaultDomain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

int64_t IntAttribute(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return a.i();
  }
  return fallback;
}

int DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") return static_cast<int>(o.version());
  }
  return 0;
}

// The initializers by name, and the names exporters give them through Identity nodes (PyTorch's
// exporter writes one initializer for equal constants and an Identity for each other use).
std::map<std::string, const onnx::TensorProto*> ConstantsByName(const onnx::GraphProto& graph) {
  std::map<std::string, const onnx::TensorProto*> constants;
  for (const auto& t : graph.initializer()) constants[t.name()] = &t;
  for (const auto& node : graph.node()) {
    if (node.op_type() != "Identity" || node.input_size() != 1 || node.output_size() != 1) continue;
    if (auto it = constants.find(node.input(0)); it != constants.end()) constants[node.output(0)] = it->second;
  }
  return constants;
}

// Every name a node of `graph` (or of its subgraphs) reads.
void CollectReadNames(const onnx::GraphProto& graph, std::set<std::string>* names) {
  for (const auto& node : graph.node()) {
    for (const auto& input : node.input()) names->insert(input);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) CollectReadNames(a.g(), names);
      for (const auto& g : a.graphs()) CollectReadNames(g, names);
    }
  }
  for (const auto& output : graph.output()) names->insert(output.name());
}

onnx::TensorProto MakeTensor(const std::string& name, int data_type, const std::vector<int64_t>& dims,
                             const void* data, size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(data, bytes);
  return t;
}

onnx::NodeProto MakeNode(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                         std::optional<int64_t> axis = std::nullopt) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_name(output);
  for (const auto& input : inputs) node.add_input(input);
  node.add_output(output);
  if (axis) {
    auto* a = node.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*axis);
  }
  return node;
}

// The graph being rewritten: new initializers and nodes, and names that are still free.
class QdqBuilder {
 public:
  QdqBuilder(onnx::GraphProto* graph, std::filesystem::path base_dir) : graph_(graph), base_dir_(std::move(base_dir)) {
    for (const auto& t : graph->initializer()) {
      taken_.insert(t.name());
      original_initializers_.insert(t.name());
    }
    initializers_ = ConstantsByName(*graph);
    for (const auto& v : graph->input()) taken_.insert(v.name());
    for (const auto& node : graph->node()) {
      for (const auto& o : node.output()) taken_.insert(o);
    }
  }

  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 2; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  // X -> Q -> DQ, once per activation; the name to read instead of X.
  std::string Activation(const std::string& x, const ActivationQuantization& q, std::vector<onnx::NodeProto>* nodes) {
    if (auto it = activations_.find(x); it != activations_.end()) return it->second;
    const std::string scale = Unique(x + "_scale"), zero_point = Unique(x + "_zero_point");
    AddInitializer(MakeTensor(scale, onnx::TensorProto::FLOAT, {}, &q.scale, sizeof(float)));
    const uint8_t zero = q.is_signed ? 0 : q.zero_point;
    AddInitializer(MakeTensor(zero_point, q.is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8, {}, &zero, 1));
    const std::string quantized = Unique(x + "_quantized"), dequantized = Unique(x + "_dequantized");
    nodes->push_back(MakeNode("QuantizeLinear", {x, scale, zero_point}, quantized));
    nodes->push_back(MakeNode("DequantizeLinear", {quantized, scale, zero_point}, dequantized));
    activation_scales_[x] = q.scale;
    return activations_[x] = dequantized;
  }

  // A weight as int8 per channel of `axis` through DQ, once per weight; the name to read instead.
  StatusOr<std::string> Weight(const std::string& w, int axis, std::vector<onnx::NodeProto>* nodes) {
    if (auto it = weights_.find(w); it != weights_.end()) return it->second.dequantized;
    ASSIGN_OR_RETURN(Tensor tensor, ReadInitializer(w));
    if (axis >= static_cast<int>(tensor.shape.size())) return Status::InvalidArgument("weight '" + w + "' has no axis " + std::to_string(axis));
    const auto [outer, channels, inner] = Split(tensor.shape, axis);
    const float* values = tensor.values<float>().data();
    std::vector<float> scales(static_cast<size_t>(channels), 0.f);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* row = values + (o * channels + c) * inner;
        for (int64_t i = 0; i < inner; ++i) scales[c] = std::max(scales[c], std::fabs(row[i]));
      }
    }
    for (float& s : scales) s = s > 0 ? s / 127.f : 1.f;
    std::vector<int8_t> quantized(static_cast<size_t>(outer * channels * inner));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t at = (o * channels + c) * inner + i;
          quantized[at] = static_cast<int8_t>(std::clamp(std::nearbyint(values[at] / scales[c]), -127.f, 127.f));
        }
      }
    }
    WeightEntry entry{.scales = scales};
    const std::string q_name = Unique(w + "_quantized"), scale = Unique(w + "_scale"), zp = Unique(w + "_zero_point");
    AddInitializer(MakeTensor(q_name, onnx::TensorProto::INT8, tensor.shape, quantized.data(), quantized.size()));
    AddInitializer(MakeTensor(scale, onnx::TensorProto::FLOAT, {channels}, scales.data(), scales.size() * sizeof(float)));
    const std::vector<int8_t> zeros(static_cast<size_t>(channels), 0);
    AddInitializer(MakeTensor(zp, onnx::TensorProto::INT8, {channels}, zeros.data(), zeros.size()));
    entry.dequantized = Unique(w + "_dequantized");
    nodes->push_back(MakeNode("DequantizeLinear", {q_name, scale, zp}, entry.dequantized, axis));
    weights_[w] = entry;
    return entry.dequantized;
  }

  // A Conv's bias as int32 at scale x_scale * w_scale[c] through DQ (one per Conv: the scale is
  // that Conv's).
  StatusOr<std::string> Bias(const std::string& b, const std::string& x, const std::string& w,
                             std::vector<onnx::NodeProto>* nodes) {
    ASSIGN_OR_RETURN(Tensor tensor, ReadInitializer(b));
    const std::vector<float>& w_scales = weights_.at(w).scales;
    if (tensor.shape.size() != 1 || tensor.shape[0] != static_cast<int64_t>(w_scales.size())) {
      return Status::InvalidArgument("bias '" + b + "' does not have one value per output channel");
    }
    const float x_scale = activation_scales_.at(x);
    const float* values = tensor.values<float>().data();
    std::vector<float> scales(w_scales.size());
    std::vector<int32_t> quantized(w_scales.size());
    for (size_t c = 0; c < w_scales.size(); ++c) {
      scales[c] = x_scale * w_scales[c];
      const double q = std::nearbyint(static_cast<double>(values[c]) / scales[c]);
      quantized[c] = static_cast<int32_t>(std::clamp(q, -2147483647.0, 2147483647.0));
    }
    const auto channels = static_cast<int64_t>(scales.size());
    const std::string q_name = Unique(b + "_quantized"), scale = Unique(b + "_scale"), zp = Unique(b + "_zero_point");
    AddInitializer(MakeTensor(q_name, onnx::TensorProto::INT32, {channels}, quantized.data(), quantized.size() * 4));
    AddInitializer(MakeTensor(scale, onnx::TensorProto::FLOAT, {channels}, scales.data(), scales.size() * 4));
    const std::vector<int32_t> zeros(scales.size(), 0);
    AddInitializer(MakeTensor(zp, onnx::TensorProto::INT32, {channels}, zeros.data(), zeros.size() * 4));
    const std::string dequantized = Unique(b + "_dequantized");
    nodes->push_back(MakeNode("DequantizeLinear", {q_name, scale, zp}, dequantized, 0));
    return dequantized;
  }

  // Drops the fp32 initializers (and their graph inputs, in old models) nothing reads any more,
  // and the Identity nodes that named them for a quantised node.
  void DropUnread() {
    std::set<std::string> read;
    CollectReadNames(*graph_, &read);
    auto* nodes = graph_->mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i) {
      const onnx::NodeProto& node = nodes->Get(i);
      if (node.op_type() == "Identity" && node.output_size() == 1 && !read.count(node.output(0)) &&
          original_initializers_.count(node.input(0))) {
        nodes->DeleteSubrange(i, 1);
      }
    }
    read.clear();
    CollectReadNames(*graph_, &read);
    auto* initializers = graph_->mutable_initializer();
    for (int i = initializers->size() - 1; i >= 0; --i) {
      if (!read.count(initializers->Get(i).name())) initializers->DeleteSubrange(i, 1);
    }
    auto* inputs = graph_->mutable_input();
    std::set<std::string> kept;
    for (const auto& t : *initializers) kept.insert(t.name());
    for (int i = inputs->size() - 1; i >= 0; --i) {
      const std::string& name = inputs->Get(i).name();
      if (original_initializers_.count(name) && !kept.count(name)) inputs->DeleteSubrange(i, 1);
    }
  }

 private:
  struct WeightEntry {
    std::vector<float> scales;
    std::string dequantized;
  };

  static std::tuple<int64_t, int64_t, int64_t> Split(const Shape& shape, int axis) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
    return {outer, shape[static_cast<size_t>(axis)], inner};
  }

  StatusOr<Tensor> ReadInitializer(const std::string& name) {
    auto it = initializers_.find(name);
    if (it == initializers_.end()) return Status::InvalidArgument("'" + name + "' is not an initializer");
    ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(*it->second, base_dir_));
    if (tensor.dtype != DataType::kFp32) return Status::InvalidArgument("'" + name + "' is not FLOAT");
    return tensor;
  }

  // Appended after the walk over the originals: adding to the repeated field may move them.
  void AddInitializer(onnx::TensorProto tensor) { added_.push_back(std::move(tensor)); }

 public:
  void CommitInitializers() {
    for (auto& t : added_) *graph_->add_initializer() = std::move(t);
    added_.clear();
    initializers_.clear();  // pointers into the old repeated field
  }

 private:
  onnx::GraphProto* graph_;
  std::filesystem::path base_dir_;
  std::set<std::string> taken_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::set<std::string> original_initializers_;
  std::vector<onnx::TensorProto> added_;
  std::map<std::string, std::string> activations_;
  std::map<std::string, float> activation_scales_;
  std::map<std::string, WeightEntry> weights_;
};

}  // namespace

std::vector<QuantizableNode> FindQuantizableNodes(const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  const std::map<std::string, const onnx::TensorProto*> constants = ConstantsByName(graph);
  auto float_constant = [&](const std::string& name, int rank_at_least, int rank_at_most) {
    auto it = constants.find(name);
    return it != constants.end() && it->second->data_type() == onnx::TensorProto::FLOAT &&
           it->second->dims_size() >= rank_at_least && it->second->dims_size() <= rank_at_most;
  };
  std::vector<QuantizableNode> found;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!IsDefaultDomain(node) || node.input_size() < 2 || node.input(0).empty() || constants.count(node.input(0))) {
      continue;
    }
    QuantizableNode q{.node_index = i, .activation = node.input(0), .weight = node.input(1)};
    if (node.op_type() == "Conv" && float_constant(node.input(1), 3, 5)) {
      if (node.input_size() > 2 && !node.input(2).empty()) {
        if (!float_constant(node.input(2), 1, 1)) continue;  // a computed bias stays as it is: not this node
        q.bias = node.input(2);
      }
      q.weight_axis = 0;
    } else if (node.op_type() == "MatMul" && float_constant(node.input(1), 2, 2)) {
      q.weight_axis = 1;
    } else if (node.op_type() == "Gemm" && float_constant(node.input(1), 2, 2)) {
      q.weight_axis = IntAttribute(node, "transB", 0) != 0 ? 0 : 1;
    } else {
      continue;
    }
    found.push_back(std::move(q));
  }
  return found;
}

Status WriteQdq(onnx::ModelProto* model, const std::vector<QuantizableNode>& nodes,
                const std::map<std::string, ActivationQuantization>& activations,
                const std::filesystem::path& base_dir) {
  if (const int opset = DefaultOpset(*model); opset < 13) {
    return Status::InvalidArgument("quantising needs opset 13 or later (per-channel DequantizeLinear); this model is opset " +
                                   std::to_string(opset));
  }
  onnx::GraphProto* graph = model->mutable_graph();
  QdqBuilder builder(graph, base_dir);
  std::map<int, const QuantizableNode*> by_index;
  for (const QuantizableNode& n : nodes) by_index[n.node_index] = &n;
  std::vector<onnx::NodeProto> rewritten;
  rewritten.reserve(static_cast<size_t>(graph->node_size()) + nodes.size() * 4);
  for (int i = 0; i < graph->node_size(); ++i) {
    onnx::NodeProto node = graph->node(i);
    if (auto it = by_index.find(i); it != by_index.end()) {
      const QuantizableNode& q = *it->second;
      auto range = activations.find(q.activation);
      if (range == activations.end()) return Status::Internal("no calibrated range for '" + q.activation + "'");
      node.set_input(0, builder.Activation(q.activation, range->second, &rewritten));
      ASSIGN_OR_RETURN(std::string weight, builder.Weight(q.weight, q.weight_axis, &rewritten));
      node.set_input(1, weight);
      if (!q.bias.empty()) {
        ASSIGN_OR_RETURN(std::string bias, builder.Bias(q.bias, q.activation, q.weight, &rewritten));
        node.set_input(2, bias);
      }
    }
    rewritten.push_back(std::move(node));
  }
  graph->clear_node();
  for (auto& node : rewritten) *graph->add_node() = std::move(node);
  builder.CommitInitializers();
  builder.DropUnread();
  return Status::Ok();
}

}  // namespace inferd::runtime
