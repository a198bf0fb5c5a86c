// The fused post-ops of kernels/post_ops.h (a residual Add and activations) as oneDNN post-ops,
// shared by the Conv, MatMul and Gemm kernels.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/post_ops.h"

namespace inferd::runtime::dnnl_kernels {

struct FusedPostOps {
  dnnl::primitive_attr attr = OwnScratchpad();
  int residual_index = -1;  // position of the Add among oneDNN's post-ops
  dnnl::memory::desc residual_desc;
  // The Add as oneDNN's "sum" post-op: the residual is copied into the destination first. The
  // fast convolutions take that in blocked layouts, where a binary post-op with a plain residual
  // would push them onto a slow path.
  bool add_as_sum = false;
};

// Expresses `ops` as oneDNN post-ops for an output of `out_shape`, after any post-ops `fused->attr`
// already has (a kernel's own, put first). False when one cannot be (a
// residual that does not broadcast onto the output): the reference path runs then. A blocked
// residual (layout propagation) has the output's shape. `residual_desc`, when given, is how the
// residual is laid out (for a caller that views the output in other dims than the tensor's).
bool BuildPostOps(const std::vector<PostOp>& ops, const Shape& out_shape, const Tensor* residual, FusedPostOps* fused,
                  bool prefer_sum = false, bool residual_blocked = false,
                  const std::optional<dnnl::memory::desc>& residual_desc = std::nullopt);

void AddResidualArgument(const FusedPostOps& fused, const Tensor* residual, std::unordered_map<int, dnnl::memory>* args);

// The residual input of a node with post-ops: its last input when the post-ops have an Add.
const Tensor* ResidualOf(const std::vector<PostOp>& ops, std::span<const Tensor* const> inputs);

inline Shape ShapeOrEmpty(const Tensor* t) { return t ? t->shape : Shape{}; }
inline const Tensor* InputOrNull(std::span<const Tensor* const> in, size_t i) { return i < in.size() ? in[i] : nullptr; }

}  // namespace inferd::runtime::dnnl_kernels
