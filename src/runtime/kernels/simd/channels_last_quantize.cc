#include "runtime/kernels/simd/channels_last_quantize.h"

#include <algorithm>
#include <cstddef>

// Highway re-includes this file once per SIMD target (foreach_target.h); see global_pool.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/channels_last_quantize.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/quantize_rules.h"
#include "runtime/kernels/simd/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One vector of pixels of each of kChannels planes, quantised and stored interleaved.
template <size_t kChannels, typename Q, class D>
HWY_INLINE void QuantizePixels(D d, const float* HWY_RESTRICT x, size_t plane, float scale,
                               int32_t zero_point, Q* HWY_RESTRICT q) {
  const hn::Rebind<Q, D> dq;
  auto quantised = [&](size_t c) { return Quantized<Q>(d, hn::LoadU(d, x + c * plane), scale, zero_point); };
  if constexpr (kChannels == 1) {
    hn::StoreU(quantised(0), dq, q);
  } else if constexpr (kChannels == 2) {
    hn::StoreInterleaved2(quantised(0), quantised(1), dq, q);
  } else if constexpr (kChannels == 3) {
    hn::StoreInterleaved3(quantised(0), quantised(1), quantised(2), dq, q);
  } else {
    hn::StoreInterleaved4(quantised(0), quantised(1), quantised(2), quantised(3), dq, q);
  }
}

// Pixels [begin, end) of one image.
template <size_t kChannels, typename Q>
void QuantizeImage(const float* x, size_t pixels, size_t begin, size_t end, float scale, int32_t zero_point,
                   Q* q) {
  // At most 16 lanes: the interleaving stores take up to one 128-bit vector of int8 per channel.
  const hn::CappedTag<float, 16> d;
  const size_t lanes = hn::Lanes(d);
  size_t p = begin;
  for (; p + lanes <= end; p += lanes)
    QuantizePixels<kChannels>(d, x + p, pixels, scale, zero_point, q + p * kChannels);
  for (; p < end; ++p) {
    for (size_t c = 0; c < kChannels; ++c)
      q[p * kChannels + c] = Quantize<Q>(x[c * pixels + p], scale, zero_point);
  }
}

// Work items [first, last): runs of `run` pixels, image by image.
template <typename Q>
void QuantizeRange(const float* x, int64_t channels, int64_t pixels, int64_t run, int64_t first, int64_t last,
                   float scale, int32_t zero_point, Q* q) {
  const int64_t runs = (pixels + run - 1) / run;
  for (int64_t item = first; item < last; ++item) {
    const int64_t n = item / runs, begin = item % runs * run, end = std::min(pixels, begin + run);
    const float* image = x + n * channels * pixels;
    Q* out = q + n * pixels * channels;
    const auto b = static_cast<size_t>(begin), e = static_cast<size_t>(end),
               size = static_cast<size_t>(pixels);
    switch (channels) {
      case 1:
        QuantizeImage<1>(image, size, b, e, scale, zero_point, out);
        break;
      case 2:
        QuantizeImage<2>(image, size, b, e, scale, zero_point, out);
        break;
      case 3:
        QuantizeImage<3>(image, size, b, e, scale, zero_point, out);
        break;
      default:
        QuantizeImage<4>(image, size, b, e, scale, zero_point, out);
        break;
    }
  }
}

void QuantizeItems(const float* x, int64_t channels, int64_t pixels, int64_t run, int64_t first, int64_t last,
                   float scale, int32_t zero_point, bool is_signed, void* q) {
  if (is_signed)
    return QuantizeRange(x, channels, pixels, run, first, last, scale, zero_point, static_cast<int8_t*>(q));
  QuantizeRange(x, channels, pixels, run, first, last, scale, zero_point, static_cast<uint8_t*>(q));
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/threading.h"

namespace inferd::runtime::simd {

HWY_EXPORT(QuantizeItems);

bool QuantizesToChannelsLast(int64_t channels) { return channels >= 1 && channels <= 4; }

void QuantizeToChannelsLast(const float* x, int64_t batch, int64_t channels, int64_t pixels, float scale,
                            int32_t zero_point, bool is_signed, void* q) {
  constexpr int64_t kRun = 4096;  // pixels per work item: enough to share a 224x224 image out
  const int64_t items = batch * ((pixels + kRun - 1) / kRun);
  ParallelFor(items, [&](int64_t first, int64_t last) {
    HWY_DYNAMIC_DISPATCH(QuantizeItems)
    (x, channels, pixels, kRun, first, last, scale, zero_point, is_signed, q);
  });
}

}  // namespace inferd::runtime::simd
#endif
