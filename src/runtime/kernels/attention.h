// inferd.Attention, which passes/attention_fusion.cc makes of a transformer's scaled dot-product
// attention:
//   out = Transpose(Softmax(scale * (Q' x K') + mask, last axis) x V', out_perm)
// where X' = Transpose(X, x_perm) for each operand that has a perm attribute (the fusion absorbs
// the transposes exporters put around the heads), and MatMul's broadcasting applies to the batch
// dims. Q' is [batch..., S, D], K' is [batch..., D, T] (already transposed, as the exported graph
// has it), V' is [batch..., T, Dv], the optional FP32 mask broadcasts to [batch..., S, T].
//
// The reference kernel (kernels/attention.cc) loops over rows; the oneDNN one
// (kernels/dnnl/dnnl_attention.cc) runs a few heads at a time so that their scores stay in cache.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"
#include "runtime/kernels/strided_view.h"

namespace inferd::runtime {

struct AttentionAttributes {
  float scale = 1;
  // Empty: the operand is read as it is.
  std::vector<int64_t> q_perm, k_perm, v_perm, out_perm;
};
StatusOr<AttentionAttributes> ReadAttentionAttributes(const Node& node);

// One run's operands as strided views of their buffers (element strides), in the logical shapes
// above, with the batch dims broadcast: every view's strides have one entry per batch dim (0 where
// it broadcasts) followed by its two matrix dims.
struct AttentionGeometry {
  Shape batch;
  int64_t s = 0, t = 0, d = 0, dv = 0;
  StridedView q, k, v;
  std::optional<StridedView> mask;
  StridedView result;     // where the logical [batch..., S, Dv] result goes in the output buffer
  Shape output_shape;     // the output tensor's shape (after out_perm)
};
StatusOr<AttentionGeometry> ResolveAttention(const AttentionAttributes& attributes,
                                             std::span<const Tensor* const> inputs);

}  // namespace inferd::runtime
