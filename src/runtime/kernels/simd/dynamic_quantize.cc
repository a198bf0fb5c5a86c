#include "runtime/kernels/simd/dynamic_quantize.h"

#include <algorithm>
#include <cstddef>

#include "runtime/kernels/quantize_rules.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/dynamic_quantize.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

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

// Adding the zero point in FP32 is exact below 2^24; above it the value saturates either way.
void ToUint8(const float* HWY_RESTRICT x, size_t count, float scale, uint8_t zero_point, uint8_t* HWY_RESTRICT q) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t lanes = hn::Lanes(df);
  const auto divisor = hn::Set(df, scale), offset = hn::Set(df, zero_point);
  const auto lowest = hn::Zero(df), highest = hn::Set(df, 255.0f);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    const auto rounded = hn::Add(hn::Round(hn::Div(hn::LoadU(df, x + i), divisor)), offset);
    const auto clamped = hn::Min(hn::Max(rounded, lowest), highest);
    hn::StoreU(hn::DemoteTo(du8, hn::ConvertTo(di, clamped)), du8, q + i);
  }
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
