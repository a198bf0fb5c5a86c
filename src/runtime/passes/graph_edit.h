// Small graph-editing helpers shared by the optimizer passes.
#pragma once

#include <map>
#include <vector>

#include "runtime/ir/graph.h"

namespace inferd::runtime {

// For each value, the indices of the nodes that read it.
std::vector<std::vector<size_t>> ConsumersOf(const Graph& graph);
// For each value, the index of the node that produces it (-1 for inputs and initializers).
std::vector<int> ProducersOf(const Graph& graph);

bool IsGraphOutput(const Graph& graph, ValueId id);
const Tensor* ConstantOf(const Graph& graph, ValueId id);  // nullptr unless an initializer

// Makes every reader of `from` read `to` instead.
void ReplaceUses(Graph* graph, ValueId from, ValueId to);

// Drops nodes marked in `removed` (keeps the order of the rest) and initializers nothing reads.
void EraseNodes(Graph* graph, const std::vector<bool>& removed);

// Op counts, for --dump-graph before/after.
std::map<std::string, int> CountOps(const Graph& graph);

}  // namespace inferd::runtime
