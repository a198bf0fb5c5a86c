#include "runtime/passes/graph_edit.h"

#include <algorithm>
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

std::map<std::string, int> CountOps(const Graph& graph) {
  std::map<std::string, int> counts;
  for (const Node& node : graph.nodes) counts[node.op_type]++;
  return counts;
}

}  // namespace inferd::runtime
