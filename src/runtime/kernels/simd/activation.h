// The activation our SIMD convolution kernels fuse after the bias (and the residual): the ones the
// convolutions of the models we serve carry (Relu, Relu6 as Clip(0, 6), HardSwish, Swish). The
// vector code that applies one is activation-inl.h, included by each kernel's per-target code.
#pragma once

#include <optional>
#include <vector>

namespace inferd::runtime {
struct PostOp;
}

namespace inferd::runtime::simd {

struct Activation {
  enum class Kind { kNone, kRelu, kClip, kHardSwish, kSwish };
  Kind kind = Kind::kNone;
  float low = 0, high = 0;  // kClip's bounds
};

// An activation that maps 0 to 0 keeps a blocked output's padded channels zero, as the layout
// requires; Clip with a positive minimum (or negative maximum) would not.
bool KeepsZeroPadding(const Activation& activation);

// The activation `ops` (fused post-ops, post_ops.h) amount to when they are at most one of ours;
// nullopt otherwise (other kinds, or more than one).
std::optional<Activation> ActivationOf(const std::vector<PostOp>& ops);

}  // namespace inferd::runtime::simd
