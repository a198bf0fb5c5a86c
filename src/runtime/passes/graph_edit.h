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
// A new value holding `tensor` as an initializer named `name`.
ValueId AddInitializer(Graph* graph, const std::string& name, Tensor tensor);

// Makes every reader of `from` read `to` instead.
void ReplaceUses(Graph* graph, ValueId from, ValueId to);

// Drops nodes marked in `removed` (keeps the order of the rest) and initializers nothing reads.
void EraseNodes(Graph* graph, const std::vector<bool>& removed);

// Collects fusions (a set of nodes replaced by one new node) and applies them together. The new
// node takes the place of the last node it replaces: every value it reads exists by then (the
// replaced nodes read them), and every reader of its output comes after it.
class Fusions {
 public:
  explicit Fusions(const Graph& graph) : claimed_(graph.nodes.size(), false) {}
  // False, and nothing recorded, when an earlier fusion already took one of `nodes`.
  bool Add(const std::vector<size_t>& nodes, Node fused);
  // Rewrites the graph; returns how many fusions there were.
  int Apply(Graph* graph);

 private:
  std::vector<bool> claimed_;
  std::vector<std::pair<size_t, Node>> fused_;
};

// Drops nodes whose outputs nothing reads (ONNX's inference ops have no side effects); returns how
// many.
int EraseDeadNodes(Graph* graph);

bool IsDefaultDomain(const Node& node);

// The value of a one-element FP32 constant, or `missing`.
float ScalarOf(const Graph& graph, ValueId id, float missing);
// For a binary node with one scalar constant operand (either side): the other operand and the constant.
bool SplitScalar(const Graph& graph, const Node& node, ValueId* other, float* constant);
// |value - expected| within 1e-4 relative: constants exported in float.
bool Near(float value, float expected);

// Op counts, for --dump-graph before/after.
std::map<std::string, int> CountOps(const Graph& graph);

}  // namespace inferd::runtime
