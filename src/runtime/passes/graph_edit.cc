#include "runtime/passes/graph_edit.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace inferd::runtime {

std::vector<std::vector<size_t>> ConsumersOf(const Graph& graph) {
  std::vector<std::vector<size_t>> consumers(graph.values.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (ValueId id : graph.nodes[n].inputs) {
      if (id != kNoValue) consumers[id].push_back(n);
    }
  }
  return consumers;
}

std::vector<int> ProducersOf(const Graph& graph) {
  std::vector<int> producers(graph.values.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (ValueId id : graph.nodes[n].outputs) {
      if (id != kNoValue) producers[id] = static_cast<int>(n);
    }
  }
  return producers;
}

bool IsGraphOutput(const Graph& graph, ValueId id) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), id) != graph.outputs.end();
}

const Tensor* ConstantOf(const Graph& graph, ValueId id) {
  auto it = graph.initializers.find(id);
  return it == graph.initializers.end() ? nullptr : &it->second;
}

void ReplaceUses(Graph* graph, ValueId from, ValueId to) {
  for (Node& node : graph->nodes) {
    std::replace(node.inputs.begin(), node.inputs.end(), from, to);
  }
}

void EraseNodes(Graph* graph, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    if (!removed[n]) kept.push_back(std::move(graph->nodes[n]));
  }
  graph->nodes = std::move(kept);
  std::set<ValueId> read(graph->outputs.begin(), graph->outputs.end());
  for (const Node& node : graph->nodes) read.insert(node.inputs.begin(), node.inputs.end());
  for (auto it = graph->initializers.begin(); it != graph->initializers.end();) {
    it = read.count(it->first) ? std::next(it) : graph->initializers.erase(it);
  }
}

bool Fusions::Add(const std::vector<size_t>& nodes, Node fused) {
  if (nodes.empty() || std::any_of(nodes.begin(), nodes.end(), [&](size_t i) { return claimed_[i]; })) return false;
  for (size_t i : nodes) claimed_[i] = true;
  fused_.emplace_back(*std::max_element(nodes.begin(), nodes.end()), std::move(fused));
  return true;
}

int Fusions::Apply(Graph* graph) {
  std::vector<bool> removed = claimed_;
  for (auto& [position, node] : fused_) {
    graph->nodes[position] = std::move(node);
    removed[position] = false;
  }
  EraseNodes(graph, removed);
  return static_cast<int>(fused_.size());
}

int EraseDeadNodes(Graph* graph) {
  std::vector<bool> read(graph->values.size(), false);
  for (ValueId id : graph->outputs) read[static_cast<size_t>(id)] = true;
  std::vector<bool> removed(graph->nodes.size(), false);
  int erased = 0;
  // Backwards: a node's readers come after it, so their fate is known when it is reached.
  for (size_t n = graph->nodes.size(); n-- > 0;) {
    const Node& node = graph->nodes[n];
    const bool live = std::any_of(node.outputs.begin(), node.outputs.end(),
                                  [&](ValueId id) { return id != kNoValue && read[static_cast<size_t>(id)]; });
    if (!live) {
      removed[n] = true;
      ++erased;
      continue;
    }
    for (ValueId id : node.inputs) {
      if (id != kNoValue) read[static_cast<size_t>(id)] = true;
    }
  }
  if (erased > 0) EraseNodes(graph, removed);
  return erased;
}

bool IsDefaultDomain(const Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

float ScalarOf(const Graph& graph, ValueId id, float missing) {
  const Tensor* constant = ConstantOf(graph, id);
  if (constant == nullptr || constant->dtype != DataType::kFp32 || constant->byte_size != sizeof(float)) return missing;
  return *reinterpret_cast<const float*>(constant->data.get());
}

bool SplitScalar(const Graph& graph, const Node& node, ValueId* other, float* constant) {
  if (node.inputs.size() != 2 || !node.HasInput(0) || !node.HasInput(1)) return false;
  for (int side = 0; side < 2; ++side) {
    const float value = ScalarOf(graph, node.inputs[side], NAN);
    if (!std::isnan(value)) {
      *other = node.inputs[1 - side];
      *constant = value;
      return true;
    }
  }
  return false;
}

bool Near(float value, float expected) { return std::fabs(value - expected) <= 1e-4f * std::fabs(expected); }

std::map<std::string, int> CountOps(const Graph& graph) {
  std::map<std::string, int> counts;
  for (const Node& node : graph.nodes) counts[node.op_type]++;
  return counts;
}

ValueId AddInitializer(Graph* graph, const std::string& name, Tensor tensor) {
  tensor.name = name;
  std::vector<Dim> dims;
  for (int64_t d : tensor.shape) dims.push_back({.value = d});
  const ValueId id = graph->AddValue({.name = name, .dtype = tensor.dtype, .shape = std::move(dims)});
  graph->initializers[id] = std::move(tensor);
  return id;
}

}  // namespace inferd::runtime
