#include "runtime/kernels/simd/depthwise_conv.h"

#include <algorithm>
#include <cstddef>

// Highway re-includes this file once per SIMD target (foreach_target.h); see global_pool.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/depthwise_conv.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/simd/activation-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Where one output row of one channel block reads: the taps kernel rows [kh_begin, kh_end) hit.
struct RowTaps {
  const float* x;        // the image's plane for this block: in_h x in_w x block
  const float* weights;  // this block's kernel_h x kernel_w x block
  int64_t first_ih;      // the input row of tap row 0 (may be negative)
  int64_t kh_begin, kh_end;
};

// One output pixel near the edge: taps outside the image are skipped (zero padding).
template <size_t kBlock, class D>
hn::Vec<D> EdgePixel(D d, const DepthwiseShape& s, const RowTaps& row, int64_t ow, size_t lane0, hn::Vec<D> acc) {
  const int64_t first_iw = ow * s.stride_w - s.pad_left;
  const int64_t kw_begin = std::max<int64_t>(0, -first_iw), kw_end = std::min(s.kernel_w, s.in_w - first_iw);
  for (int64_t kh = row.kh_begin; kh < row.kh_end; ++kh) {
    // An index, not a pointer: first_iw may be negative, and a pointer before the plane is undefined.
    const auto block = static_cast<int64_t>(kBlock);
    const int64_t x_row = ((row.first_ih + kh) * s.in_w + first_iw) * block + static_cast<int64_t>(lane0);
    const float* w_row = row.weights + kh * s.kernel_w * kBlock + lane0;
    for (int64_t kw = kw_begin; kw < kw_end; ++kw) {
      const int64_t tap = kw * block;
      acc = hn::MulAdd(hn::LoadU(d, row.x + (x_row + tap)), hn::LoadU(d, w_row + tap), acc);
    }
  }
  return acc;
}

// Interior pixels [ow, ow_end) of one stride-1 row, kPixels at a time, for a kernel width known at
// compile time: along a kernel row, input pixel j of the run feeds output p through tap j - p, so
// each input vector is loaded once and used by every output it reaches (kPixels + kWidth - 1 loads
// and kWidth weights per kPixels * kWidth multiply-adds, against two loads per multiply-add in the
// generic loop). Returns where it stopped.
template <size_t kBlock, size_t kWidth, class D, class StoreRun>
int64_t SlidingInterior(D d, const DepthwiseShape& s, const RowTaps& row, int64_t ow, int64_t ow_end, size_t lane0,
                        hn::Vec<D> start, const StoreRun& store_run) {
  // Accumulators, weights and one input vector in registers: 32 on AVX-512, 16 on AVX2.
  constexpr size_t kPixels = HWY_LANES(float) >= 16 ? 8 : 4;
  constexpr size_t kSpan = kPixels - 1 + kWidth;
  const auto block = static_cast<int64_t>(kBlock);
  for (; ow + static_cast<int64_t>(kPixels) <= ow_end; ow += kPixels) {
    hn::Vec<D> acc[kPixels];
    for (size_t p = 0; p < kPixels; ++p) acc[p] = start;
    for (int64_t kh = row.kh_begin; kh < row.kh_end; ++kh) {
      const float* x_row = row.x + ((row.first_ih + kh) * s.in_w + ow - s.pad_left) * block + lane0;
      const float* w_row = row.weights + kh * s.kernel_w * block + lane0;
      hn::Vec<D> w[kWidth];
      for (size_t kw = 0; kw < kWidth; ++kw) w[kw] = hn::LoadU(d, w_row + kw * kBlock);
#pragma GCC unroll 24
      for (size_t j = 0; j < kSpan; ++j) {
        const auto x = hn::LoadU(d, x_row + j * kBlock);
        for (size_t p = 0; p < kPixels; ++p) {
          if (j >= p && j - p < kWidth) acc[p] = hn::MulAdd(x, w[j - p], acc[p]);
        }
      }
    }
    store_run.template operator()<kPixels>(acc, ow);
  }
  return ow;
}

template <size_t kBlock>
void ConvolveRow(const DepthwiseShape& s, const RowTaps& row, const float* bias, const Activation& activation,
                 float* y_row) {
  const hn::CappedTag<float, kBlock> d;
  const size_t lanes = hn::Lanes(d);
  // Interior: ow * stride - pad >= 0 and ow * stride - pad + kernel_w <= in_w.
  const int64_t ow_begin = std::min(s.out_w, (s.pad_left + s.stride_w - 1) / s.stride_w);
  const int64_t last_fit = s.in_w - s.kernel_w + s.pad_left;
  const int64_t ow_end = std::max(ow_begin, last_fit < 0 ? 0 : std::min(s.out_w, last_fit / s.stride_w + 1));
  const auto step = static_cast<size_t>(s.stride_w) * kBlock;
  for (size_t lane0 = 0; lane0 < kBlock; lane0 += lanes) {
    const auto start = bias ? hn::LoadU(d, bias + lane0) : hn::Zero(d);
    auto store = [&](hn::Vec<decltype(d)> acc, int64_t ow) {
      hn::StoreU(Activate(d, activation, acc), d, y_row + ow * static_cast<int64_t>(kBlock) + lane0);
    };
    // kRun adjacent output pixels from ow, their activation side by side (a Swish's long chains).
    auto store_run = [&]<size_t kRun>(hn::Vec<decltype(d)>* acc, int64_t ow) {
      ActivateEach<kRun>(d, activation, acc);
      for (size_t p = 0; p < kRun; ++p) {
        hn::StoreU(acc[p], d, y_row + (ow + static_cast<int64_t>(p)) * static_cast<int64_t>(kBlock) + lane0);
      }
    };
    for (int64_t ow = 0; ow < ow_begin; ++ow) store(EdgePixel<kBlock>(d, s, row, ow, lane0, start), ow);
    int64_t ow = ow_begin;
    // Stride 1 only: measured faster for 5x5 (AVX-512 EPYC, 2026-12-04, 1.4x at 28x28) and, in
    // nChw16c, for 3x3 (1.1-1.2x, bench/kernels/simd_kernels_bench.cc); for stride 2 the two
    // loops timed alike.
    if (s.stride_w == 1) {
      switch (s.kernel_w) {
        case 3: ow = SlidingInterior<kBlock, 3>(d, s, row, ow, ow_end, lane0, start, store_run); break;
        case 5: ow = SlidingInterior<kBlock, 5>(d, s, row, ow, ow_end, lane0, start, store_run); break;
        default: break;  // the generic loop below
      }
    }
    for (; ow + 4 <= ow_end; ow += 4) {
      hn::Vec<decltype(d)> a[4] = {start, start, start, start};
      for (int64_t kh = row.kh_begin; kh < row.kh_end; ++kh) {
        const float* x_row = row.x + ((row.first_ih + kh) * s.in_w + ow * s.stride_w - s.pad_left) * kBlock + lane0;
        const float* w_row = row.weights + kh * s.kernel_w * kBlock + lane0;
        for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
          const auto w = hn::LoadU(d, w_row + kw * kBlock);
          const float* x_tap = x_row + kw * kBlock;
          a[0] = hn::MulAdd(hn::LoadU(d, x_tap), w, a[0]);
          a[1] = hn::MulAdd(hn::LoadU(d, x_tap + step), w, a[1]);
          a[2] = hn::MulAdd(hn::LoadU(d, x_tap + 2 * step), w, a[2]);
          a[3] = hn::MulAdd(hn::LoadU(d, x_tap + 3 * step), w, a[3]);
        }
      }
      store_run.template operator()<4>(a, ow);
    }
    for (; ow < s.out_w; ++ow) store(EdgePixel<kBlock>(d, s, row, ow, lane0, start), ow);
  }
}

void DepthwiseRows(const DepthwiseShape& s, const float* x, const float* weights, const float* bias,
                   const Activation& activation, int64_t first_row, int64_t rows, float* y) {
  const int64_t blocks = (s.channels + s.block - 1) / s.block;
  for (int64_t r = first_row; r < first_row + rows; ++r) {
    const int64_t plane = r / s.out_h, oh = r % s.out_h, block = plane % blocks;
    RowTaps row{.x = x + plane * s.in_h * s.in_w * s.block,
                .weights = weights + block * s.kernel_h * s.kernel_w * s.block,
                .first_ih = oh * s.stride_h - s.pad_top, .kh_begin = 0, .kh_end = 0};
    row.kh_begin = std::max<int64_t>(0, -row.first_ih);
    row.kh_end = std::min(s.kernel_h, s.in_h - row.first_ih);
    const float* block_bias = bias ? bias + block * s.block : nullptr;
    float* y_row = y + (plane * s.out_h + oh) * s.out_w * s.block;
    if (s.block == 16) {
      ConvolveRow<16>(s, row, block_bias, activation, y_row);
    } else {
      ConvolveRow<8>(s, row, block_bias, activation, y_row);
    }
  }
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/threading.h"

namespace inferd::runtime::simd {

HWY_EXPORT(DepthwiseRows);

std::vector<float> PackDepthwiseWeights(const float* weights, const DepthwiseShape& s) {
  const int64_t blocks = (s.channels + s.block - 1) / s.block, taps = s.kernel_h * s.kernel_w;
  std::vector<float> packed(static_cast<size_t>(blocks * taps * s.block), 0.0f);
  for (int64_t c = 0; c < s.channels; ++c) {
    for (int64_t t = 0; t < taps; ++t) {
      packed[static_cast<size_t>(((c / s.block) * taps + t) * s.block + c % s.block)] = weights[c * taps + t];
    }
  }
  return packed;
}

void DepthwiseConv(const DepthwiseShape& shape, const float* x, const float* packed_weights, const float* bias,
                   const Activation& activation, float* y) {
  const int64_t rows = shape.batch * ((shape.channels + shape.block - 1) / shape.block) * shape.out_h;
  ParallelFor(rows, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(DepthwiseRows)(shape, x, packed_weights, bias, activation, begin, end - begin, y);
  });
}

}  // namespace inferd::runtime::simd
#endif
