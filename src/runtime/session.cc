#include "runtime/session.h"

#include <chrono>
#include <map>
#include <set>

#include "runtime/onnx/onnx_import.h"

namespace inferd::runtime {

StatusOr<std::unique_ptr<Session>> Session::Load(const std::filesystem::path& model_path, SessionOptions options) {
  ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(model_path));
  auto session = FromGraph(std::move(graph), options);
  if (!session.ok()) return session.status().WithPrefix(model_path.string());
  return session;
}

StatusOr<std::unique_ptr<Session>> Session::FromGraph(Graph graph, SessionOptions options) {
  std::unique_ptr<Session> session(new Session());
  session->graph_ = std::move(graph);
  const KernelRegistry& registry = options.registry ? *options.registry : KernelRegistry::Default();
  if (options.optimize) {
    OptimizerOptions optimizer_options;
    optimizer_options.onednn_kernels = &registry == &KernelRegistry::Default();
    ASSIGN_OR_RETURN(session->optimization_, Optimize(&session->graph_, optimizer_options));
  }
  RETURN_IF_ERROR(session->BuildKernels(registry));
  return session;
}

Status Session::BuildKernels(const KernelRegistry& registry) {
  // Every problem in one error: the user fixes the model (or asks for ops) once, not op by op.
  std::map<std::string, std::vector<std::string>> unsupported_nodes;  // op -> node names
  std::vector<std::string> invalid;
  for (const Node& node : graph_.nodes) {
    const KernelFactory* factory = registry.Find(node.op_type, node.domain, graph_.opset);
    if (factory == nullptr) {
      std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
      unsupported_nodes[op].push_back(node.name);
      kernels_.push_back(nullptr);
      continue;
    }
    auto kernel = (*factory)(node, graph_.opset);
    if (!kernel.ok()) {
      invalid.push_back(kernel.status().message());
      kernels_.push_back(nullptr);
      continue;
    }
    kernels_.push_back(std::move(kernel).value());
  }
  // One entry per op type, naming up to three of its nodes: a model with 45 ScatterND nodes gets a
  // readable message.
  std::vector<std::string> unsupported;
  for (const auto& [op, names] : unsupported_nodes) {
    std::string entry = op + " (node";
    entry += names.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < names.size() && i < 3; ++i) entry += (i ? ", '" : "'") + names[i] + "'";
    if (names.size() > 3) entry += " and " + std::to_string(names.size() - 3) + " more";
    unsupported.push_back(entry + ")");
  }
  if (!unsupported.empty() || !invalid.empty()) {
    std::string message;
    auto join = [](const std::vector<std::string>& items) {
      std::string text;
      for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
      return text;
    };
    if (!unsupported.empty()) {
      message = std::to_string(unsupported.size()) + " unsupported operator type(s) at opset " +
                std::to_string(graph_.opset) + ": " + join(unsupported);
    }
    if (!invalid.empty()) message += (message.empty() ? "" : "; ") + join(invalid);
    return Status::Unimplemented(message);
  }

  std::set<ValueId> keep(graph_.outputs.begin(), graph_.outputs.end());
  std::vector<int> last_reader(graph_.values.size(), -1);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    for (ValueId id : graph_.nodes[i].inputs) {
      if (id != kNoValue) last_reader[id] = static_cast<int>(i);
    }
  }
  release_after_.assign(graph_.nodes.size(), {});
  for (size_t id = 0; id < last_reader.size(); ++id) {
    const auto value = static_cast<ValueId>(id);
    if (last_reader[id] >= 0 && !keep.count(value) && !graph_.initializers.count(value)) {
      release_after_[last_reader[id]].push_back(value);
    }
  }
  return Status::Ok();
}

Status Session::CheckInput(size_t index, const Tensor& tensor) const {
  const ValueInfo& info = input(index);
  if (info.dtype != DataType::kInvalid && tensor.dtype != info.dtype) {
    return Status::InvalidArgument("input '" + info.name + "' must be " + std::string(DataTypeName(info.dtype)) +
                                   ", got " + std::string(DataTypeName(tensor.dtype)));
  }
  if (info.shape) {
    bool matches = info.shape->size() == tensor.shape.size();
    for (size_t d = 0; matches && d < tensor.shape.size(); ++d) {
      const Dim& dim = (*info.shape)[d];
      matches = !dim.is_known() || dim.value == tensor.shape[d];
    }
    if (!matches) {
      return Status::InvalidArgument("input '" + info.name + "' has shape " + ShapeToString(tensor.shape) +
                                     ", which the model does not accept");
    }
  }
  return Status::Ok();
}

Status Session::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  if (inputs.size() != graph_.inputs.size()) {
    return Status::InvalidArgument("the model takes " + std::to_string(graph_.inputs.size()) + " inputs, got " +
                                   std::to_string(inputs.size()));
  }
  std::vector<Tensor> values(graph_.values.size());
  std::vector<const Tensor*> slots(graph_.values.size(), nullptr);
  for (const auto& [id, tensor] : graph_.initializers) slots[id] = &tensor;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckInput(i, inputs[i]));
    slots[graph_.inputs[i]] = &inputs[i];
  }
  std::vector<const Tensor*> node_inputs;
  std::vector<Tensor> node_outputs;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    node_inputs.clear();
    for (ValueId id : node.inputs) node_inputs.push_back(id == kNoValue ? nullptr : slots[id]);
    node_outputs.assign(node.outputs.size(), Tensor{});
    const auto start = node_seconds_.empty() ? std::chrono::steady_clock::time_point() : std::chrono::steady_clock::now();
    Status status = kernels_[n]->Run(node_inputs, node_outputs);
    if (!node_seconds_.empty()) {
      node_seconds_[n] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!status.ok()) return status.WithPrefix(node.Describe());
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId id = node.outputs[o];
      if (id == kNoValue) continue;
      values[id] = std::move(node_outputs[o]);
      slots[id] = &values[id];
    }
    for (ValueId id : release_after_[n]) {
      values[id] = Tensor{};
      slots[id] = nullptr;
    }
  }
  outputs->clear();
  for (ValueId id : graph_.outputs) {
    if (slots[id] == nullptr) return Status::Internal("output '" + graph_.value(id).name + "' was not produced");
    Tensor result = *slots[id];
    result.name = graph_.value(id).name;
    outputs->push_back(std::move(result));
  }
  return Status::Ok();
}

}  // namespace inferd::runtime
