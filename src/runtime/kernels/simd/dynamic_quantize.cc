#include "runtime/kernels/simd/dynamic_quantize.h"

#include <algorithm>
#include <cstddef>

#include "runtime/kernels/quantize_rules.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/dynamic_quantize.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/simd/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Range(const float* HWY_RESTRICT x, size_t count, float* low_high) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  auto low0 = hn::Zero(d), low1 = low0, high0 = low0, high1 = low0;
  size_t i = 0;
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    const auto v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + lanes);
    low0 = hn::Min(low0, v0);
    low1 = hn::Min(low1, v1);
    high0 = hn::Max(high0, v0);
    high1 = hn::Max(high1, v1);
  }
  float low = hn::GetLane(hn::MinOfLanes(d, hn::Min(low0, low1)));
  float high = hn::GetLane(hn::MaxOfLanes(d, hn::Max(high0, high1)));
  for (; i < count; ++i) {
    low = std::min(low, x[i]);
    high = std::max(high, x[i]);
  }
  low_high[0] = low;
  low_high[1] = high;
}

void ToUint8(const float* HWY_RESTRICT x, size_t count, float scale, uint8_t zero_point, uint8_t* HWY_RESTRICT q) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) StoreQuantized(df, hn::LoadU(df, x + i), scale, zero_point, q + i);
  for (; i < count; ++i) q[i] = Quantize<uint8_t>(x[i], scale, zero_point);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(Range);
HWY_EXPORT(ToUint8);

ValueRange RangeWithZero(const float* x, int64_t count) {
  float low_high[2];
  HWY_DYNAMIC_DISPATCH(Range)(x, static_cast<size_t>(count), low_high);
  return {.low = low_high[0], .high = low_high[1]};
}

void QuantizeToUint8(const float* x, int64_t count, float scale, uint8_t zero_point, uint8_t* q) {
  HWY_DYNAMIC_DISPATCH(ToUint8)(x, static_cast<size_t>(count), scale, zero_point, q);
}

}  // namespace inferd::runtime::simd
#endif
