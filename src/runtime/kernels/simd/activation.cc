#include "runtime/kernels/simd/activation.h"

#include "runtime/kernels/post_ops.h"

namespace inferd::runtime::simd {

bool KeepsZeroPadding(const Activation& activation) {
  return activation.kind != Activation::Kind::kClip || (activation.low <= 0 && activation.high >= 0);
}

std::optional<Activation> ActivationOf(const std::vector<PostOp>& ops) {
  if (ops.empty()) return Activation{Activation::Kind::kNone};
  if (ops.size() > 1) return std::nullopt;
  switch (ops[0].kind) {
    case PostOp::Kind::kRelu: return Activation{Activation::Kind::kRelu};
    case PostOp::Kind::kClip: return Activation{.kind = Activation::Kind::kClip, .low = ops[0].alpha, .high = ops[0].beta};
    case PostOp::Kind::kHardSwish: return Activation{Activation::Kind::kHardSwish};
    case PostOp::Kind::kSwish: return Activation{Activation::Kind::kSwish};
    default: return std::nullopt;
  }
}

}  // namespace inferd::runtime::simd
