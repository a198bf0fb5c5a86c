// Per-target vector code for QuantizeLinear's rule, shared by the kernels that write int8 or
// uint8 (swish, depthwise_int8, channel_scale, dynamic_quantize): q = saturate(round_half_even(
// v / scale) + zero_point), the division in fp32 as quantize_rules.h's Quantize<Q>, value for
// value. Adding the zero point in fp32 is exact: a value that large saturates anyway. Highway's
// include guard: toggled once per target, so each target gets a copy.
#if defined(INFERD_RUNTIME_KERNELS_SIMD_QUANTIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFERD_RUNTIME_KERNELS_SIMD_QUANTIZE_INL_H_
#undef INFERD_RUNTIME_KERNELS_SIMD_QUANTIZE_INL_H_
#else
#define INFERD_RUNTIME_KERNELS_SIMD_QUANTIZE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <limits>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {

// One vector already in the quantised units (v / scale), rounded half to even, offset by the
// zero point and saturated: Lanes(d) values of Q, in a vector (for stores that interleave them).
template <typename Q, class D, class V>
HWY_INLINE auto Rounded(D d, V scaled, int32_t zero_point) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<Q, D> dq;
  const V rounded = hn::Add(hn::Round(scaled), hn::Set(d, static_cast<float>(zero_point)));
  const V clamped = hn::Min(hn::Max(rounded, hn::Set(d, static_cast<float>(std::numeric_limits<Q>::min()))),
                            hn::Set(d, static_cast<float>(std::numeric_limits<Q>::max())));
  return hn::DemoteTo(dq, hn::ConvertTo(di, clamped));
}

// The same, stored at q.
template <typename Q, class D, class V>
HWY_INLINE void StoreRounded(D d, V scaled, int32_t zero_point, Q* HWY_RESTRICT q) {
  namespace hn = hwy::HWY_NAMESPACE;
  hn::StoreU(Rounded<Q>(d, scaled, zero_point), hn::Rebind<Q, D>(), q);
}

// One vector of fp32 values `v` by QuantizeLinear's rule (v / scale, then as Rounded).
template <typename Q, class D, class V>
HWY_INLINE auto Quantized(D d, V v, float scale, int32_t zero_point) {
  return Rounded<Q>(d, hwy::HWY_NAMESPACE::Div(v, hwy::HWY_NAMESPACE::Set(d, scale)), zero_point);
}

// The same, stored at q.
template <typename Q, class D, class V>
HWY_INLINE void StoreQuantized(D d, V v, float scale, int32_t zero_point, Q* HWY_RESTRICT q) {
  namespace hn = hwy::HWY_NAMESPACE;
  hn::StoreU(Quantized<Q>(d, v, scale, zero_point), hn::Rebind<Q, D>(), q);
}

// One vector of values `v` stored as the output wants them: fp32 as they are, int8 or uint8 by
// QuantizeLinear's rule.
template <typename Y, class D, class V>
HWY_INLINE void StoreAs(D d, V v, float scale, int32_t zero_point, Y* HWY_RESTRICT y) {
  if constexpr (std::is_same_v<Y, float>) {
    hwy::HWY_NAMESPACE::StoreU(v, d, y);
  } else {
    StoreQuantized(d, v, scale, zero_point, y);
  }
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
