#include "runtime/kernels/simd/channel_scale.h"

#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/channel_scale.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <size_t kLanes>
void ScaleWith(const float* HWY_RESTRICT x, const float* HWY_RESTRICT factors, float* y, int64_t pixels,
               int64_t block) {
  const hn::CappedTag<float, kLanes> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  if (block == lanes) {  // the common blocked layout: one register of factors for every pixel
    const auto f = hn::LoadU(d, factors);
    for (int64_t p = 0; p < pixels; ++p) hn::StoreU(hn::Mul(hn::LoadU(d, x + p * block), f), d, y + p * block);
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t v = 0; v < block; v += lanes) {
      hn::StoreU(hn::Mul(hn::LoadU(d, x + p * block + v), hn::LoadU(d, factors + v)), d, y + p * block + v);
    }
  }
}

void Scale(const float* x, const float* factors, float* y, int64_t pixels, int64_t block) {
  if (block % 16 == 0) return ScaleWith<16>(x, factors, y, pixels, block);
  if (block % 8 == 0) return ScaleWith<8>(x, factors, y, pixels, block);
  if (block % 4 == 0) return ScaleWith<4>(x, factors, y, pixels, block);
  ScaleWith<1>(x, factors, y, pixels, block);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(Scale);

void ScaleChannelBlock(const float* x, const float* factors, float* y, int64_t pixels, int64_t block) {
  HWY_DYNAMIC_DISPATCH(Scale)(x, factors, y, pixels, block);
}

}  // namespace inferd::runtime::simd
#endif
