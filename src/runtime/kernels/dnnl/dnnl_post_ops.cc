#include "runtime/kernels/dnnl/dnnl_post_ops.h"

#include "runtime/kernels/dnnl/dnnl_layout.h"

namespace inferd::runtime::dnnl_kernels {

bool BuildPostOps(const std::vector<PostOp>& ops, const Shape& out_shape, const Tensor* residual, FusedPostOps* fused,
                  bool prefer_sum, bool residual_blocked, const std::optional<dnnl::memory::desc>& residual_desc) {
  dnnl::post_ops post_ops = fused->attr.get_post_ops();  // after any the kernel put first
  for (size_t i = 0; i < ops.size(); ++i) {
    const PostOp& op = ops[i];
    switch (op.kind) {
      case PostOp::Kind::kAdd: {
        if (residual == nullptr || residual->dtype != DataType::kFp32 || residual->shape.size() > out_shape.size()) return false;
        Shape padded = residual->shape;
        padded.insert(padded.begin(), out_shape.size() - padded.size(), 1);
        for (size_t d = 0; d < padded.size(); ++d) {
          if (padded[d] != out_shape[d] && padded[d] != 1) return false;
        }
        if (residual_blocked && padded != out_shape) return false;
        fused->residual_desc = residual_desc ? *residual_desc : LayoutDesc(padded, residual_blocked);
        fused->residual_index = post_ops.len();
        fused->add_as_sum = prefer_sum && post_ops.len() == 0 && residual->shape == out_shape;
        if (fused->add_as_sum) {
          post_ops.append_sum(1.0f);
        } else {
          post_ops.append_binary(dnnl::algorithm::binary_add, fused->residual_desc);
        }
        break;
      }
      case PostOp::Kind::kRelu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0, 0); break;
      case PostOp::Kind::kLeakyRelu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, op.alpha, 0); break;
      case PostOp::Kind::kClip: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, op.alpha, op.beta); break;
      case PostOp::Kind::kSigmoid: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0, 0); break;
      case PostOp::Kind::kTanh: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0, 0); break;
      case PostOp::Kind::kHardSwish: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0, 0); break;
      case PostOp::Kind::kElu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_elu, op.alpha, 0); break;
      case PostOp::Kind::kGelu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0, 0); break;
      case PostOp::Kind::kSwish: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0); break;
      case PostOp::Kind::kHardSigmoid:  // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid
        post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, op.alpha, op.beta);
        post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
        break;
    }
  }
  fused->attr.set_post_ops(post_ops);
  return true;
}

void AddResidualArgument(const FusedPostOps& fused, const Tensor* residual, std::unordered_map<int, dnnl::memory>* args) {
  if (fused.residual_index < 0 || fused.add_as_sum) return;
  args->emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(fused.residual_index) | DNNL_ARG_SRC_1,
                Wrap(fused.residual_desc, residual->data.get()));
}

const Tensor* ResidualOf(const std::vector<PostOp>& ops, std::span<const Tensor* const> in) {
  return HasAdd(ops) && !in.empty() ? in.back() : nullptr;
}

}  // namespace inferd::runtime::dnnl_kernels
