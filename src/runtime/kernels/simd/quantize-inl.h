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

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {

// One vector already in the quantised units (v / scale), rounded half to even, offset by the
// zero point and saturated into Lanes(d) values at q.
template <typename Q, class D, class V>
HWY_INLINE void StoreRounded(D d, V scaled, int32_t zero_point, Q* HWY_RESTRICT q) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<Q, D> dq;
  const V rounded = hn::Add(hn::Round(scaled), hn::Set(d, static_cast<float>(zero_point)));
  const V clamped = hn::Min(hn::Max(rounded, hn::Set(d, static_cast<float>(std::numeric_limits<Q>::min()))),
                            hn::Set(d, static_cast<float>(std::numeric_limits<Q>::max())));
  hn::StoreU(hn::DemoteTo(dq, hn::ConvertTo(di, clamped)), dq, q);
}

// One vector of fp32 values `v`, quantised into Lanes(d) values at q.
template <typename Q, class D, class V>
HWY_INLINE void StoreQuantized(D d, V v, float scale, int32_t zero_point, Q* HWY_RESTRICT q) {
  StoreRounded(d, hwy::HWY_NAMESPACE::Div(v, hwy::HWY_NAMESPACE::Set(d, scale)), zero_point, q);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
