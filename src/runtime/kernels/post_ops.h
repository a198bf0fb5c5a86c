// Operations fused onto Conv, Gemm and MatMul by the optimizer (passes/activation_fusion): a
// residual Add and element-wise activations, applied in order to the op's output. oneDNN runs them
// as post-ops inside the primitive; the reference kernels apply them here, after the op.
//
// In the graph they are node attributes written by the pass:
//   _post_ops   strings: "Add", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSwish", "Elu",
//               "Swish" (x * sigmoid(x), inferd.Swish), "HardSigmoid", "Gelu" (exact, inferd.Gelu)
//   _post_alpha floats, _post_beta floats: one per op (LeakyRelu/Elu alpha; Clip min and max;
//               HardSigmoid alpha and beta)
// An "Add" reads the node's last input (the residual).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"
#include "runtime/kernels/kernel.h"

namespace inferd::runtime {

struct PostOp {
  enum class Kind { kAdd, kRelu, kLeakyRelu, kClip, kSigmoid, kTanh, kHardSwish, kElu, kSwish, kHardSigmoid, kGelu };
  Kind kind = Kind::kRelu;
  float alpha = 0;
  float beta = 0;
};

StatusOr<std::vector<PostOp>> ReadPostOps(const Node& node);
// The post-op an activation node becomes, if it can be fused; Clip needs constant bounds, given here.
std::optional<PostOp> PostOpForActivation(const Node& node, const Tensor* clip_min, const Tensor* clip_max);
std::string PostOpName(PostOp::Kind kind);
bool HasAdd(const std::vector<PostOp>& ops);

// Applies `ops` to the FP32 tensor `*out` in place, except that an Add whose residual broadcasts
// the output to a larger shape replaces *out with the larger result.
Status ApplyPostOps(const std::vector<PostOp>& ops, const Tensor* residual, Tensor* out);

// Wraps a kernel factory so that a node carrying post-ops runs the kernel, then ApplyPostOps (the
// residual is the node's last input; the wrapped kernel ignores inputs past its own).
KernelFactory WithPostOps(KernelFactory inner);

}  // namespace inferd::runtime
