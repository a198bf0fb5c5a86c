#include "runtime/passes/optimizer.h"

#include "runtime/passes/graph_edit.h"

namespace inferd::runtime {

const std::vector<OptimizerPass>& OptimizerPasses() {
  static const std::vector<OptimizerPass> passes = {
      // QDQ int8 convolutions first: constant folding would turn DequantizeLinear(int8 weights)
      // into fp32 weights, and the model would run in fp32 what its file says is int8.
      // Models quantised in QOperator form take the same int8 kernels: QLinearConv directly,
      // QLinearMatMul through its QDQ spelling.
      {"fuse_qlinear_conv", FuseQLinearConv, /*needs_onednn=*/true},
      {"expand_qlinear_matmul", ExpandQLinearMatMul, /*needs_onednn=*/true},
      {"fuse_qdq_conv", FuseQdqConv, /*needs_onednn=*/true},
      {"fuse_qdq_matmul", FuseQdqMatMul, /*needs_onednn=*/true},
      // ONNX Runtime's dynamic quantisation (DynamicQuantizeLinear -> MatMulInteger -> scale).
      {"fuse_dynamic_quantized_matmul", FuseDynamicQuantizedMatMul, /*needs_onednn=*/true},
      // Constants first, so that BatchNorm parameters, Clip bounds, reshape targets and Dropout's
      // training_mode computed from constants are initializers by the time the others look.
      {"fold_constants", FoldConstants},
      // Identity/Dropout next: they hide patterns (Conv -> Identity -> Relu) from later passes.
      {"eliminate_identities", EliminateIdentities},
      // Shape arithmetic the batch dim does not reach: constants too (then folded on).
      {"fold_shapes", FoldShapes},
      // BatchNorm folds into the Conv's weights before any fusion takes the Conv's output.
      {"fold_batchnorm_into_conv", FoldBatchNormIntoConv},
      // LayerNorm spelled out in nine ops (exports before opset 17) becomes one.
      {"fuse_layernorm", FuseLayerNorm},
      // Sigmoid(x)*x -> Swish before the fusions, so that a Conv can take it as one post-op.
      {"rewrite_activations", RewriteActivations},
      // Attention before the post-op fusions, which would take its mask Add into the MatMul.
      {"fuse_attention", FuseAttention},
      // Residual Add before activations: ResNet's Conv -> Add -> Relu becomes one Conv with
      // post-ops [Add, Relu]; the other order could not take the Add any more.
      {"fuse_residual_add", FuseResidualAdd},
      {"fuse_activations", FuseActivations},
      // After the activations joined their Convs: the quantised output is what follows them.
      {"fuse_int8_requantize", FuseInt8Requantize, /*needs_onednn=*/true},
      // Last: it decides the layout of what the fusions left.
      {"propagate_layouts", PropagateLayouts, /*needs_onednn=*/true},
  };
  return passes;
}

StatusOr<OptimizationReport> Optimize(Graph* graph, OptimizerOptions options) {
  OptimizationReport report;
  report.ops_before = CountOps(*graph);
  for (const OptimizerPass& pass : OptimizerPasses()) {
    if (pass.needs_onednn && !options.onednn_kernels) continue;
    auto rewrites = pass.apply(graph);
    if (!rewrites.ok()) return rewrites.status().WithPrefix(std::string("optimizer pass ") + pass.name);
    report.rewrites.emplace_back(pass.name, *rewrites);
  }
  RETURN_IF_ERROR(graph->CheckTopologicalOrder());
  report.ops_after = CountOps(*graph);
  return report;
}

}  // namespace inferd::runtime
