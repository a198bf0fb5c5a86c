// The optimizer: graph passes run in one fixed order at load. Each pass is one file with one entry
// function that returns how many rewrites it made; each is tested by running a graph before and
// after it and comparing outputs (tests/unit/runtime_passes_test.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

// The passes (passes/*.cc).
StatusOr<int> EliminateIdentities(Graph* graph);
StatusOr<int> FoldConstants(Graph* graph);
StatusOr<int> FuseQdqConv(Graph* graph);
StatusOr<int> FuseQdqMatMul(Graph* graph);
StatusOr<int> FuseQLinearConv(Graph* graph);
StatusOr<int> ExpandQLinearMatMul(Graph* graph);
StatusOr<int> FuseDynamicQuantizedMatMul(Graph* graph);
StatusOr<int> FuseInt8Requantize(Graph* graph);
StatusOr<int> FoldShapes(Graph* graph);
StatusOr<int> FoldBatchNormIntoConv(Graph* graph);
StatusOr<int> FuseResidualAdd(Graph* graph);
StatusOr<int> FuseActivations(Graph* graph);
StatusOr<int> RewriteActivations(Graph* graph);
StatusOr<int> FuseLayerNorm(Graph* graph);
StatusOr<int> FuseAttention(Graph* graph);
StatusOr<int> PropagateLayouts(Graph* graph);

// The outputs of a node whose inputs are all constants, computed on the reference kernels;
// nullopt when it cannot or should not fold (random ops, errors, results over 64 MiB).
std::optional<std::vector<Tensor>> EvaluateConstantNode(const Graph& graph, const Node& node);

struct OptimizerPass {
  const char* name;
  StatusOr<int> (*apply)(Graph*);
  // Passes whose result only oneDNN's kernels can run (blocked layouts) are skipped for others.
  bool needs_onednn = false;
};
const std::vector<OptimizerPass>& OptimizerPasses();

struct OptimizationReport {
  std::map<std::string, int> ops_before, ops_after;
  std::vector<std::pair<std::string, int>> rewrites;  // pass name, count
};

struct OptimizerOptions {
  bool onednn_kernels = true;  // false when the session runs the reference kernels
};

StatusOr<OptimizationReport> Optimize(Graph* graph, OptimizerOptions options = {});

}  // namespace inferd::runtime
