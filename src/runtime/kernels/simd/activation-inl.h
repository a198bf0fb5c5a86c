// Per-target vector code for activation.h, included by the kernels' Highway sources inside their
// per-target pass. Highway's include guard: toggled once per target, so each target gets a copy.
#if defined(INFERD_RUNTIME_KERNELS_SIMD_ACTIVATION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFERD_RUNTIME_KERNELS_SIMD_ACTIVATION_INL_H_
#undef INFERD_RUNTIME_KERNELS_SIMD_ACTIVATION_INL_H_
#else
#define INFERD_RUNTIME_KERNELS_SIMD_ACTIVATION_INL_H_
#endif

#include <hwy/highway.h>

#include "runtime/kernels/simd/activation.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {

template <class D, class V>
HWY_INLINE V Activate(D d, const Activation& activation, V v) {
  namespace hn = hwy::HWY_NAMESPACE;
  switch (activation.kind) {
    case Activation::Kind::kNone: return v;
    case Activation::Kind::kRelu: return hn::Max(v, hn::Zero(d));
    case Activation::Kind::kClip: return hn::Min(hn::Max(v, hn::Set(d, activation.low)), hn::Set(d, activation.high));
    case Activation::Kind::kHardSwish: {
      const V gate = hn::Min(hn::Max(hn::Add(v, hn::Set(d, 3.0f)), hn::Zero(d)), hn::Set(d, 6.0f));
      return hn::Mul(hn::Mul(v, gate), hn::Set(d, 1.0f / 6.0f));
    }
  }
  return v;
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
