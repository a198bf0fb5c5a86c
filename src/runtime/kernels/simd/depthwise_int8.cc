#include "runtime/kernels/simd/depthwise_int8.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

// Highway re-includes this file once per SIMD target (foreach_target.h); see global_pool.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/depthwise_int8.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/simd/activation-inl.h"
#include "runtime/kernels/simd/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kMaxKernelHeight = 16;  // what DepthwiseInt8Shape allows (depthwise_int8.h)

// Stores one vector of results: fp32 as it is, or requantised as oneDNN requantises (times
// 1 / y_scale, `inverse_scale`, then QuantizeLinear's rounding and saturation).
template <typename Y, class D, class V>
HWY_INLINE void StoreResult(D d, V v, V inverse_scale, int32_t zero_point, Y* y) {
  if constexpr (std::is_same_v<Y, float>) {
    hn::StoreU(v, d, y);
  } else {
    StoreRounded(d, hn::Mul(v, inverse_scale), zero_point, y);
  }
}

// A thread's fp32 copies of the input rows its output rows read: (x - zero point), with the
// padding on the left and right as zeros, so that every tap along a row is inside it. Converted
// once per row and kept while the next output rows read it (kernel_h rows at stride 1 overlap).
struct ConvertedRows {
  int64_t width = 0;  // padded: pad_left + in_w + what the last output's taps need on the right
  int64_t slots = 0;
  std::vector<float> data;    // slots x width x channels
  std::vector<int64_t> held;  // per slot: image * in_h + ih, or -1
};

template <typename X>
const float* ConvertedRow(const DepthwiseInt8Shape& s, const X* x, int64_t image, int64_t ih, int32_t zero_point,
                          ConvertedRows* rows) {
  const int64_t key = image * s.in_h + ih, slot = key % rows->slots, channels = s.channels;
  float* row = rows->data.data() + slot * rows->width * channels;
  if (rows->held[static_cast<size_t>(slot)] == key) return row;
  const hn::CappedTag<float, 16> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<X, decltype(d)> dx;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto zp = hn::Set(d, static_cast<float>(zero_point));
  std::fill(row, row + s.pad_left * channels, 0.0f);
  const X* in = x + key * s.in_w * channels;
  float* out = row + s.pad_left * channels;
  const int64_t count = s.in_w * channels;
  int64_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(hn::Sub(hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(dx, in + i))), zp), d, out + i);
  }
  for (; i < count; ++i) out[i] = static_cast<float>(in[i]) - static_cast<float>(zero_point);
  std::fill(out + s.in_w * channels, row + rows->width * channels, 0.0f);
  rows->held[static_cast<size_t>(slot)] = key;
  return row;
}

// kPixels output pixels from ow on, every channel vector: each weight vector is loaded once for
// the kPixels independent multiply-add chains. kWidth: the kernel's width when the compiler should
// unroll the taps (3 or 5), else 0 (s.kernel_w).
template <typename Y, size_t kLanes, size_t kPixels, int64_t kWidth>
void ConvolvePixels(const DepthwiseInt8Shape& s, const float* const* rows, int64_t tap_rows, int64_t ow,
                    int64_t c_begin, int64_t c_end, const DepthwiseInt8Params& p, Y* y_row) {
  const hn::CappedTag<float, kLanes> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t channels = s.channels, padded = DepthwiseInt8PaddedChannels(channels);
  const int64_t pixel_step = s.stride_w * channels, width = kWidth > 0 ? kWidth : s.kernel_w;
  const float* bias = p.bias.empty() ? nullptr : p.bias.data();
  const auto inverse_scale = hn::Set(d, 1.0f / p.y_scale);
  for (int64_t c = c_begin; c < c_end; c += lanes) {
    hn::Vec<decltype(d)> acc[kPixels];
    for (size_t i = 0; i < kPixels; ++i) acc[i] = bias ? hn::LoadU(d, bias + c) : hn::Zero(d);
    for (int64_t r = 0; r < tap_rows; ++r) {
      const float* x_tap = rows[2 * r] + ow * pixel_step + c;
      const float* w_tap = rows[2 * r + 1] + c;  // this tap row's weights
      // Pointers stepped along the taps, not offsets per (tap, pixel): unrolled, those took more
      // registers than AVX2 has and spilled (perf: a third of the loop's time in stack loads).
#pragma GCC unroll 1
      for (int64_t kw = 0; kw < width; ++kw, x_tap += channels, w_tap += padded) {
        const auto w = hn::LoadU(d, w_tap);
        const float* x_pixel = x_tap;
        for (size_t i = 0; i < kPixels; ++i, x_pixel += pixel_step) acc[i] = hn::MulAdd(hn::LoadU(d, x_pixel), w, acc[i]);
      }
    }
    const auto scale = hn::LoadU(d, p.scales.data() + c);
    // (One pixel's activation at a time: ActivateEach here, side by side, tripled this file's
    // compile time under the sanitizers, 36 instantiations per target, for a kernel the tuning
    // seldom picks.)
    for (size_t i = 0; i < kPixels; ++i) {
      StoreResult(d, Activate(d, p.activation, hn::Mul(acc[i], scale)), inverse_scale, p.y_zero_point,
                  y_row + (ow + static_cast<int64_t>(i)) * channels + c);
    }
  }
}

// kPixels output pixels from ow on, every channel: the vectors of the full width (16 lanes, or
// the target's), then the channels past the last multiple of 16 (72 = 64 + 8) in the widest
// vector that divides them, so that no vector crosses a pixel's end.
template <typename Y, size_t kPixels, int64_t kWidth>
void ConvolvePixelsAllChannels(const DepthwiseInt8Shape& s, const float* const* rows, int64_t tap_rows, int64_t ow,
                               const DepthwiseInt8Params& p, Y* y_row) {
  const int64_t main = s.channels / 16 * 16, rest = s.channels - main;
  if (main > 0) ConvolvePixels<Y, 16, kPixels, kWidth>(s, rows, tap_rows, ow, 0, main, p, y_row);
  if (rest == 0) return;
  if (rest % 8 == 0) return ConvolvePixels<Y, 8, kPixels, kWidth>(s, rows, tap_rows, ow, main, s.channels, p, y_row);
  if (rest % 4 == 0) return ConvolvePixels<Y, 4, kPixels, kWidth>(s, rows, tap_rows, ow, main, s.channels, p, y_row);
  ConvolvePixels<Y, 1, kPixels, kWidth>(s, rows, tap_rows, ow, main, s.channels, p, y_row);
}

// Every output pixel of a row, four at a time; a row's last few pixels are its last four again
// (recomputing some: the values are the same), and rows narrower than four go one at a time.
template <typename Y, int64_t kWidth>
void ConvolveRowPixels(const DepthwiseInt8Shape& s, const float* const* rows, int64_t tap_rows,
                       const DepthwiseInt8Params& p, Y* y_row) {
  constexpr int64_t kPixels = 4;
  if (s.out_w < kPixels) {
    for (int64_t ow = 0; ow < s.out_w; ++ow) ConvolvePixelsAllChannels<Y, 1, kWidth>(s, rows, tap_rows, ow, p, y_row);
    return;
  }
  for (int64_t ow = 0;; ow += kPixels) {
    const int64_t start = std::min(ow, s.out_w - kPixels);
    ConvolvePixelsAllChannels<Y, kPixels, kWidth>(s, rows, tap_rows, start, p, y_row);
    if (start + kPixels >= s.out_w) break;
  }
}

// One output row of one image.
template <typename X, typename Y>
void ConvolveRow(const DepthwiseInt8Shape& s, const X* x, int64_t image, int64_t oh, const float* weights,
                 const DepthwiseInt8Params& p, ConvertedRows* converted, Y* y_row) {
  const int64_t padded = DepthwiseInt8PaddedChannels(s.channels);
  const int64_t first_ih = oh * s.stride_h - s.pad_top;
  const int64_t kh_begin = std::max<int64_t>(0, -first_ih), kh_end = std::min(s.kernel_h, s.in_h - first_ih);
  // Pairs: a converted input row, and the weights of the kernel row that reads it.
  const float* rows[2 * kMaxKernelHeight];
  int64_t tap_rows = 0;
  for (int64_t kh = kh_begin; kh < kh_end; ++kh, ++tap_rows) {
    rows[2 * tap_rows] = ConvertedRow<X>(s, x, image, first_ih + kh, p.x_zero_point, converted);
    rows[2 * tap_rows + 1] = weights + kh * s.kernel_w * padded;
  }
  switch (s.kernel_w) {
    case 3: return ConvolveRowPixels<Y, 3>(s, rows, tap_rows, p, y_row);
    case 5: return ConvolveRowPixels<Y, 5>(s, rows, tap_rows, p, y_row);
    default: return ConvolveRowPixels<Y, 0>(s, rows, tap_rows, p, y_row);
  }
}

template <typename X, typename Y>
void Rows(const DepthwiseInt8Shape& s, const void* x, const float* weights, const DepthwiseInt8Params& p,
          int64_t first_row, int64_t rows, void* y) {
  thread_local ConvertedRows converted;
  // (At least the whole input row: with stride 2 and no padding the last column may go unread.)
  converted.width = std::max((s.out_w - 1) * s.stride_w + s.kernel_w, s.pad_left + s.in_w);
  converted.slots = s.kernel_h + s.stride_h;  // the rows one output row reads, and the next one's new rows
  converted.data.resize(static_cast<size_t>(converted.slots * converted.width * s.channels));
  converted.held.assign(static_cast<size_t>(converted.slots), -1);
  for (int64_t r = first_row; r < first_row + rows; ++r) {
    Y* y_row = static_cast<Y*>(y) + r * s.out_w * s.channels;
    ConvolveRow(s, static_cast<const X*>(x), r / s.out_h, r % s.out_h, weights, p, &converted, y_row);
  }
}

template <typename X>
void RowsFrom(const DepthwiseInt8Shape& s, const void* x, const float* weights, const DepthwiseInt8Params& p,
              int64_t first_row, int64_t rows, void* y) {
  if (!p.y_quantised) return Rows<X, float>(s, x, weights, p, first_row, rows, y);
  if (p.y_signed) return Rows<X, int8_t>(s, x, weights, p, first_row, rows, y);
  Rows<X, uint8_t>(s, x, weights, p, first_row, rows, y);
}

void DepthwiseInt8Rows(const DepthwiseInt8Shape& s, const void* x, const float* weights, const DepthwiseInt8Params& p,
                       int64_t first_row, int64_t rows, void* y) {
  if (p.x_signed) return RowsFrom<int8_t>(s, x, weights, p, first_row, rows, y);
  RowsFrom<uint8_t>(s, x, weights, p, first_row, rows, y);
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/threading.h"

namespace inferd::runtime::simd {

HWY_EXPORT(DepthwiseInt8Rows);

std::vector<float> PackDepthwiseInt8(const int8_t* weights, const DepthwiseInt8Shape& s, DepthwiseInt8Params* params) {
  const int64_t padded = DepthwiseInt8PaddedChannels(s.channels), taps = s.kernel_h * s.kernel_w;
  std::vector<float> packed(static_cast<size_t>(taps * padded), 0.0f);
  for (int64_t c = 0; c < s.channels; ++c) {
    for (int64_t t = 0; t < taps; ++t) packed[static_cast<size_t>(t * padded + c)] = weights[c * taps + t];
  }
  params->scales.resize(static_cast<size_t>(padded), 0.0f);
  if (!params->bias.empty()) params->bias.resize(static_cast<size_t>(padded), 0.0f);
  return packed;
}

void DepthwiseConvInt8(const DepthwiseInt8Shape& shape, const void* x, const float* packed_weights,
                       const DepthwiseInt8Params& params, void* y) {
  ParallelFor(shape.batch * shape.out_h, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(DepthwiseInt8Rows)(shape, x, packed_weights, params, begin, end - begin, y);
  });
}

}  // namespace inferd::runtime::simd
#endif
