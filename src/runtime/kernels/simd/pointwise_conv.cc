#include "runtime/kernels/simd/pointwise_conv.h"

#include <algorithm>
#include <cstddef>

#include "runtime/threading.h"

// Highway re-includes this file once per SIMD target (foreach_target.h); see global_pool.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/pointwise_conv.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "runtime/kernels/simd/activation-inl.h"

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The register tile for a block width on this target: each pixel of the tile holds kOut output
// blocks of kVectors vectors. AVX-512 has 32 vector registers and AVX2 16: the accumulators take
// 24 or 12 of them, the weights row and the broadcast input value the rest.
template <size_t kBlock>
struct TileShape {
  static constexpr size_t kLanes = kBlock < HWY_LANES(float) ? kBlock : HWY_LANES(float);
  static constexpr size_t kVectors = kBlock / kLanes;
  static constexpr size_t kOut = kVectors >= 2 ? 1 : 2;
  static constexpr size_t kAccumulators = HWY_LANES(float) >= 16 ? 24 : 12;
  static constexpr size_t kPixels = std::max<size_t>(1, kAccumulators / (kOut * kVectors));
};

// Where one tile reads and writes; strides in floats.
struct TileView {
  const float* x;         // the tile's first pixel in input block 0
  size_t x_block_stride;  // from one input block to the next: pixels x block
  size_t in_blocks;
  const float* w;         // the packed rows of the tile's first output block
  size_t w_block_stride;  // from one output block's rows to the next: in channels padded x block
  const float* bias;      // the tile's first output block's, or null
  const float* residual;  // at the tile's first output, or null
  float* y;               // the tile's first output pixel in its first output block
  size_t y_block_stride;  // from one output block to the next: pixels x block
};

template <size_t kBlock, size_t kPixels, size_t kOut>
HWY_INLINE void Tile(const TileView& t, const Activation& activation) {
  const hn::CappedTag<float, kBlock> d;
  constexpr size_t kLanes = TileShape<kBlock>::kLanes, kVectors = TileShape<kBlock>::kVectors;
  constexpr size_t kColumns = kOut * kVectors;
  using V = hn::Vec<decltype(d)>;
  V acc[kPixels][kColumns];
  for (size_t c = 0; c < kColumns; ++c) {
    const V start = t.bias ? hn::LoadU(d, t.bias + (c / kVectors) * kBlock + (c % kVectors) * kLanes) : hn::Zero(d);
    for (size_t p = 0; p < kPixels; ++p) acc[p][c] = start;
  }
  for (size_t ib = 0; ib < t.in_blocks; ++ib) {
    const float* HWY_RESTRICT xb = t.x + ib * t.x_block_stride;
    const float* HWY_RESTRICT wb = t.w + ib * kBlock * kBlock;
    for (size_t ci = 0; ci < kBlock; ++ci) {
      V w[kColumns];
      for (size_t c = 0; c < kColumns; ++c) {
        w[c] = hn::LoadU(d, wb + (c / kVectors) * t.w_block_stride + ci * kBlock + (c % kVectors) * kLanes);
      }
#pragma GCC unroll 24
      for (size_t p = 0; p < kPixels; ++p) {
        const V xv = hn::Set(d, xb[p * kBlock + ci]);
        for (size_t c = 0; c < kColumns; ++c) acc[p][c] = hn::MulAdd(xv, w[c], acc[p][c]);
      }
    }
  }
  for (size_t c = 0; c < kColumns; ++c) {
    const size_t offset = (c / kVectors) * t.y_block_stride + (c % kVectors) * kLanes;
    V values[kPixels];
    for (size_t p = 0; p < kPixels; ++p) {
      values[p] = acc[p][c];
      if (t.residual) values[p] = hn::Add(values[p], hn::LoadU(d, t.residual + offset + p * kBlock));
    }
    ActivateEach<kPixels>(d, activation, values);  // a Swish's chains side by side
    for (size_t p = 0; p < kPixels; ++p) hn::StoreU(values[p], d, t.y + offset + p * kBlock);
  }
}

// A run of `pixels` pixels of output blocks [ob, ob + kOut) of one image: whole tiles, then the
// rest in tiles of 8, 4, 2 and 1 pixels (a narrow tile waits on its few accumulators: one pixel at
// a time, the rest of a 7x7 image cost a third of a whole tile per pixel).
template <size_t kBlock, size_t kOut>
void PixelRun(TileView t, size_t pixels, const Activation& activation) {
  constexpr size_t kPixels = TileShape<kBlock>::kPixels;
  auto advance = [&](size_t by) {
    t.x += by * kBlock;
    t.y += by * kBlock;
    if (t.residual) t.residual += by * kBlock;
  };
  size_t p = 0;
  for (; p + kPixels <= pixels; p += kPixels, advance(kPixels)) Tile<kBlock, kPixels, kOut>(t, activation);
  auto rest = [&]<size_t kWidth>() {
    if constexpr (kWidth < kPixels) {
      if (p + kWidth <= pixels) {
        Tile<kBlock, kWidth, kOut>(t, activation);
        p += kWidth;
        advance(kWidth);
      }
    }
  };
  rest.template operator()<8>();
  rest.template operator()<4>();
  rest.template operator()<2>();
  rest.template operator()<1>();
}

template <size_t kBlock>
void Convolve(const PointwiseShape& s, const float* x, const float* w, const PointwiseEpilogue& e, float* y) {
  using Shape = TileShape<kBlock>;
  const auto pixels = static_cast<size_t>(s.pixels);
  const size_t in_blocks = static_cast<size_t>((s.in_channels + s.block - 1) / s.block);
  const size_t out_blocks = static_cast<size_t>((s.out_channels + s.block - 1) / s.block);
  const size_t out_groups = (out_blocks + Shape::kOut - 1) / Shape::kOut;
  // Work items: (image, output group, a run of pixel tiles), the run short enough to share out
  // among the threads and long enough that a group's weights are reused from cache.
  const size_t tiles = (pixels + Shape::kPixels - 1) / Shape::kPixels;
  const size_t runs = std::max<size_t>(1, std::min<size_t>(tiles, 8));
  const size_t run_pixels = (tiles + runs - 1) / runs * Shape::kPixels;
  const auto items = static_cast<int64_t>(static_cast<size_t>(s.batch) * out_groups * runs);
  ParallelFor(items, [&](int64_t begin, int64_t end) {
    for (auto item = static_cast<size_t>(begin); item < static_cast<size_t>(end); ++item) {
      const size_t run = item % runs, group = item / runs % out_groups, n = item / runs / out_groups;
      const size_t p0 = run * run_pixels;
      if (p0 >= pixels) continue;
      const size_t ob = group * Shape::kOut, plane = pixels * kBlock;
      const size_t y_offset = (n * out_blocks + ob) * plane + p0 * kBlock;
      const TileView t{.x = x + n * in_blocks * plane + p0 * kBlock, .x_block_stride = plane, .in_blocks = in_blocks,
                       .w = w + ob * in_blocks * kBlock * kBlock, .w_block_stride = in_blocks * kBlock * kBlock,
                       .bias = e.bias ? e.bias + ob * kBlock : nullptr,
                       .residual = e.residual ? e.residual + y_offset : nullptr, .y = y + y_offset,
                       .y_block_stride = plane};
      const size_t count = std::min(run_pixels, pixels - p0);
      if (ob + Shape::kOut <= out_blocks) {
        PixelRun<kBlock, Shape::kOut>(t, count, e.activation);
      } else {
        PixelRun<kBlock, 1>(t, count, e.activation);  // the last output block, alone
      }
    }
  });
}

void PointwiseConvOnTarget(const PointwiseShape& s, const float* x, const float* w, const PointwiseEpilogue& e, float* y) {
  if (s.block == 16) {
    Convolve<16>(s, x, w, e, y);
  } else {
    Convolve<8>(s, x, w, e, y);
  }
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(PointwiseConvOnTarget);

std::vector<float> PackPointwiseWeights(const float* weights, const PointwiseShape& s) {
  const int64_t in_padded = (s.in_channels + s.block - 1) / s.block * s.block;
  const int64_t out_blocks = (s.out_channels + s.block - 1) / s.block;
  std::vector<float> packed(static_cast<size_t>(out_blocks * in_padded * s.block), 0.0f);
  for (int64_t o = 0; o < s.out_channels; ++o) {
    for (int64_t i = 0; i < s.in_channels; ++i) {
      packed[static_cast<size_t>(((o / s.block) * in_padded + i) * s.block + o % s.block)] = weights[o * s.in_channels + i];
    }
  }
  return packed;
}

void PointwiseConv(const PointwiseShape& shape, const float* x, const float* packed_weights,
                   const PointwiseEpilogue& epilogue, float* y) {
  HWY_DYNAMIC_DISPATCH(PointwiseConvOnTarget)(shape, x, packed_weights, epilogue, y);
}

}  // namespace inferd::runtime::simd
#endif
