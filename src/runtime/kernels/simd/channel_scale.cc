#include "runtime/kernels/simd/channel_scale.h"

#include <cstddef>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/channel_scale.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/quantize_rules.h"
#include "runtime/kernels/simd/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <size_t kLanes, typename Y>
void ScaleWith(const float* x, const float* HWY_RESTRICT factors, Y* y, int64_t pixels, int64_t block,
               const ChannelScaleOutput& output) {
  const hn::CappedTag<float, kLanes> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  auto store = [&](hn::Vec<decltype(d)> v, Y* to) { StoreAs(d, v, output.scale, output.zero_point, to); };
  if (block == lanes) {  // the common blocked layout: one register of factors for every pixel
    const auto f = hn::LoadU(d, factors);
    for (int64_t p = 0; p < pixels; ++p) store(hn::Mul(hn::LoadU(d, x + p * block), f), y + p * block);
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t v = 0; v < block; v += lanes) {
      store(hn::Mul(hn::LoadU(d, x + p * block + v), hn::LoadU(d, factors + v)), y + p * block + v);
    }
  }
}

// NHWC's blocks of any channel count (72, 120: not a multiple of the vector) at the full vector
// width: the pixels' values as one flat run, each vector's factors read from `block` factors
// followed by their first `lanes` again, at the run's offset within its pixel.
constexpr int64_t kMaxFlatBlock = 1024;

template <typename Y>
void ScaleFlat(const float* x, const float* factors, Y* y, int64_t pixels, int64_t block,
               const ChannelScaleOutput& output) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float wrapped[kMaxFlatBlock + HWY_MAX_BYTES / sizeof(float)];
  for (int64_t j = 0; j < block + lanes; ++j) wrapped[j] = factors[j % block];
  const int64_t count = pixels * block;
  int64_t i = 0, offset = 0;  // offset: i % block
  for (; i + lanes <= count; i += lanes) {
    StoreAs(d, hn::Mul(hn::LoadU(d, x + i), hn::LoadU(d, wrapped + offset)), output.scale, output.zero_point, y + i);
    offset += lanes;
    while (offset >= block) offset -= block;
  }
  for (; i < count; ++i) {  // the last values, fewer than a vector
    const float v = x[i] * factors[i % block];
    if constexpr (std::is_same_v<Y, float>) {
      y[i] = v;
    } else {
      y[i] = Quantize<Y>(v, output.scale, output.zero_point);
    }
  }
}

template <typename Y>
void ScaleInto(const float* x, const float* factors, void* y, int64_t pixels, int64_t block,
               const ChannelScaleOutput& output) {
  Y* to = static_cast<Y*>(y);
  if (block % 16 == 0) return ScaleWith<16>(x, factors, to, pixels, block, output);
  if (block <= kMaxFlatBlock && pixels > 1) return ScaleFlat(x, factors, to, pixels, block, output);
  if (block % 8 == 0) return ScaleWith<8>(x, factors, to, pixels, block, output);
  if (block % 4 == 0) return ScaleWith<4>(x, factors, to, pixels, block, output);
  ScaleWith<1>(x, factors, to, pixels, block, output);
}

void Scale(const float* x, const float* factors, void* y, int64_t pixels, int64_t block, const ChannelScaleOutput& output) {
  if (!output.quantised) return ScaleInto<float>(x, factors, y, pixels, block, output);
  if (output.is_signed) return ScaleInto<int8_t>(x, factors, y, pixels, block, output);
  ScaleInto<uint8_t>(x, factors, y, pixels, block, output);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(Scale);

void ScaleChannelBlock(const float* x, const float* factors, void* y, int64_t pixels, int64_t block,
                       const ChannelScaleOutput& output) {
  HWY_DYNAMIC_DISPATCH(Scale)(x, factors, y, pixels, block, output);
}

}  // namespace inferd::runtime::simd
#endif
