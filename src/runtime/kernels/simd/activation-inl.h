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

// exp(x[k]) for k < K, in place, each x clamped to [-87, 88] where the result stays a normal
// float: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for precision), exp(r) by Cephes'
// degree-6 polynomial, 2^n by the exponent bits. n is rounded by adding 1.5 * 2^23, whose sum then
// holds n in its low mantissa bits. Each step runs over the K vectors before the next: one value's
// steps form a chain of dependent operations too long for the CPU to overlap many of, so a pass
// over a buffer keeps K independent chains side by side (SwishEach).
template <size_t K, class D, class V>
HWY_INLINE void ExpEach(D d, V* x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  const V shifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  V shifted[K], n[K], r[K], p[K];
  for (size_t k = 0; k < K; ++k) x[k] = hn::Min(hn::Max(x[k], hn::Set(d, -87.0f)), hn::Set(d, 88.0f));
  for (size_t k = 0; k < K; ++k) shifted[k] = hn::MulAdd(x[k], hn::Set(d, 1.44269504f), shifter);
  for (size_t k = 0; k < K; ++k) n[k] = hn::Sub(shifted[k], shifter);
  for (size_t k = 0; k < K; ++k) r[k] = hn::NegMulAdd(n[k], hn::Set(d, 0.693359375f), x[k]);
  for (size_t k = 0; k < K; ++k) r[k] = hn::NegMulAdd(n[k], hn::Set(d, -2.12194440e-4f), r[k]);
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(hn::Set(d, 1.9875691500e-4f), r[k], hn::Set(d, 1.3981999507e-3f));
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(p[k], r[k], hn::Set(d, 8.3334519073e-3f));
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(p[k], r[k], hn::Set(d, 4.1665795894e-2f));
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(p[k], r[k], hn::Set(d, 1.6666665459e-1f));
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(p[k], r[k], hn::Set(d, 5.0000001201e-1f));
  for (size_t k = 0; k < K; ++k) p[k] = hn::MulAdd(p[k], hn::Mul(r[k], r[k]), hn::Add(r[k], hn::Set(d, 1.0f)));
  // shifted's bits are those of 1.5 * 2^23 plus n (|n| <= 127): adding the exponent bias and
  // shifting left by the mantissa width leaves (n + 127) << 23, the higher bits shifted out.
  for (size_t k = 0; k < K; ++k) {
    const auto two_to_n = hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, shifted[k]), hn::Set(di, 127)));
    x[k] = hn::Mul(p[k], hn::BitCast(d, two_to_n));
  }
}

// x[k] / (1 + exp(-x[k])) for k < K, in place: NaN in, NaN out (the division reads x itself).
template <size_t K, class D, class V>
HWY_INLINE void SwishEach(D d, V* x) {
  namespace hn = hwy::HWY_NAMESPACE;
  V e[K];
  for (size_t k = 0; k < K; ++k) e[k] = hn::Neg(x[k]);
  ExpEach<K>(d, e);
  for (size_t k = 0; k < K; ++k) x[k] = hn::Div(x[k], hn::Add(hn::Set(d, 1.0f), e[k]));
}

template <class D, class V>
HWY_INLINE V SwishOf(D d, V x) {
  SwishEach<1>(d, &x);
  return x;
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

// SwishEach as a call: the convolution kernels' epilogues run it once per few vectors, and inlined
// there (a copy per tile shape, output block and target) it more than doubled those files' compile
// time under the sanitizers; a call costs little beside twenty operations per vector.
template <size_t K, class D, class V>
HWY_NOINLINE void SwishEachCalled(D d, V* x) {
  SwishEach<K>(d, x);
}

// The activation of K vectors in place; a Swish four side by side (SwishEach): more chains at once
// spill registers (eight took 1.2x the time of four in the AVX-512 depthwise kernel).
template <size_t K, class D, class V>
HWY_INLINE void ActivateEach(D d, const Activation& activation, V* v) {
  if (activation.kind == Activation::Kind::kSwish) {
    constexpr size_t kSideBySide = 4;
    for (size_t k = 0; k + kSideBySide <= K; k += kSideBySide) SwishEachCalled<kSideBySide>(d, v + k);
    if constexpr (K % kSideBySide != 0) SwishEachCalled<K % kSideBySide>(d, v + K - K % kSideBySide);
    return;
  }
  for (size_t k = 0; k < K; ++k) v[k] = Activate(d, activation, v[k]);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
