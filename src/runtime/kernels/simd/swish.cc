#include "runtime/kernels/simd/swish.h"

#include <algorithm>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/swish.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/simd/activation-inl.h"
#include "runtime/kernels/simd/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Enough floats for the widest vector of any x86 target (AVX-512: 16).
constexpr size_t kMaxLanes = 64;

// Vectors computed side by side (activation-inl.h's SwishEach): one vector's Swish is a chain of
// about twenty dependent operations, which left AVX2's pipes waiting on latency (20 cycles per
// vector of 8 alone, 9 with four side by side on a Zen 3 EPYC; two side by side took 13).
constexpr size_t kSideBySide = 4;

void SwishRange(float* HWY_RESTRICT x, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + kSideBySide * lanes <= count; i += kSideBySide * lanes) {
    hn::Vec<decltype(d)> v[kSideBySide];
    for (size_t k = 0; k < kSideBySide; ++k) v[k] = hn::LoadU(d, x + i + k * lanes);
    SwishEach<kSideBySide>(d, v);
    for (size_t k = 0; k < kSideBySide; ++k) hn::StoreU(v[k], d, x + i + k * lanes);
  }
  for (; i + lanes <= count; i += lanes) hn::StoreU(SwishOf(d, hn::LoadU(d, x + i)), d, x + i);
  if (i == count) return;
  float tail[kMaxLanes] = {};
  std::memcpy(tail, x + i, (count - i) * sizeof(float));
  hn::StoreU(SwishOf(d, hn::LoadU(d, tail)), d, tail);
  std::memcpy(x + i, tail, (count - i) * sizeof(float));
}

template <bool kSwish, typename Q>
void QuantizeAs(const float* HWY_RESTRICT x, size_t count, float scale, int32_t zero_point, Q* HWY_RESTRICT q) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  // The fused convolution's requantisation multiplies by 1 / scale, as oneDNN's does (a division
  // per vector costs a fifth of the pass on AVX2); QuantizeLinear's own rounding divides.
  const auto inverse = hn::Set(df, 1.0f / scale);
  auto store_vector = [&](hn::Vec<decltype(df)> v, Q* to) {
    if constexpr (kSwish) {
      StoreRounded(df, hn::Mul(v, inverse), zero_point, to);
    } else {
      StoreQuantized(df, v, scale, zero_point, to);
    }
  };
  auto store = [&](const float* from, Q* to) {
    auto v = hn::LoadU(df, from);
    if constexpr (kSwish) v = SwishOf(df, v);
    store_vector(v, to);
  };
  size_t i = 0;
  for (; i + kSideBySide * lanes <= count; i += kSideBySide * lanes) {
    hn::Vec<decltype(df)> v[kSideBySide];
    for (size_t k = 0; k < kSideBySide; ++k) v[k] = hn::LoadU(df, x + i + k * lanes);
    if constexpr (kSwish) SwishEach<kSideBySide>(df, v);
    for (size_t k = 0; k < kSideBySide; ++k) store_vector(v[k], q + i + k * lanes);
  }
  for (; i + lanes <= count; i += lanes) store(x + i, q + i);
  if (i == count) return;
  float tail[kMaxLanes] = {};
  Q tail_q[kMaxLanes];
  std::memcpy(tail, x + i, (count - i) * sizeof(float));
  store(tail, tail_q);
  std::memcpy(q + i, tail_q, (count - i) * sizeof(Q));
}

void QuantizeRange(const float* HWY_RESTRICT x, size_t count, float scale, int32_t zero_point, bool is_signed,
                   bool swish, void* HWY_RESTRICT q) {
  if (is_signed) {
    auto* to = static_cast<int8_t*>(q);
    return swish ? QuantizeAs<true>(x, count, scale, zero_point, to) : QuantizeAs<false>(x, count, scale, zero_point, to);
  }
  auto* to = static_cast<uint8_t*>(q);
  swish ? QuantizeAs<true>(x, count, scale, zero_point, to) : QuantizeAs<false>(x, count, scale, zero_point, to);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(SwishRange);
HWY_EXPORT(QuantizeRange);

void Swish(float* x, size_t count) { HWY_DYNAMIC_DISPATCH(SwishRange)(x, count); }

void SwishQuantize(const float* x, size_t count, float scale, int32_t zero_point, bool is_signed, void* q) {
  HWY_DYNAMIC_DISPATCH(QuantizeRange)(x, count, scale, zero_point, is_signed, /*swish=*/true, q);
}

void QuantizeValues(const float* x, size_t count, float scale, int32_t zero_point, bool is_signed, void* q) {
  HWY_DYNAMIC_DISPATCH(QuantizeRange)(x, count, scale, zero_point, is_signed, /*swish=*/false, q);
}

}  // namespace inferd::runtime::simd
#endif
