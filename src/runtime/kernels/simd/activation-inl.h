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

// exp(x) for x clamped to [-87, 88], where the result stays a normal float: x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two for precision), exp(r) by Cephes' degree-6 polynomial, 2^n by the
// exponent bits.
template <class D, class V>
HWY_INLINE V Exp(D d, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  x = hn::Min(hn::Max(x, hn::Set(d, -87.0f)), hn::Set(d, 88.0f));
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto two_to_n = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, two_to_n));
}

// x / (1 + exp(-x)): NaN in, NaN out (the division reads x itself).
template <class D, class V>
HWY_INLINE V SwishOf(D d, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), Exp(d, hn::Neg(x))));
}

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
    case Activation::Kind::kSwish: return SwishOf(d, v);
  }
  return v;
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
