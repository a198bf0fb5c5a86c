#include "runtime/kernels/simd/winograd_transforms.h"

#include <algorithm>
#include <cstddef>

#include "runtime/threading.h"

// Highway re-includes this file once per SIMD target (foreach_target.h); see global_pool.cc.
// The tiles' loops are unrolled by pragma: left as loops, GCC kept the tile's vectors in memory
// (F(4x4) ran ~1.3x slower than written out).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/winograd_transforms.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Where one tile's group of channels reads or writes in the blocked tensor and in V or M.
struct TileAt {
  const float* plane;    // the group's first channel of pixel (0, 0) of the tile's image
  int64_t h, w;          // the image
  int64_t pixel_stride;  // floats from one pixel to the next: the layout's block
  int64_t y0, x0;        // the tile's first pixel (input tiles: may lie in the padding)
  int64_t stride;        // floats from one position p of V or M to the next: tiles x channels
};

// The group's channels at pixel (y, x); zero outside the image (padding). kInside: the whole tile
// lies in the image (most tiles), no check.
template <bool kInside, class D>
HWY_INLINE hn::Vec<D> LoadPixel(D d, const TileAt& t, int64_t y, int64_t x) {
  if (kInside || (y >= 0 && y < t.h && x >= 0 && x < t.w))
    return hn::LoadU(d, t.plane + (y * t.w + x) * t.pixel_stride);
  return hn::Zero(d);
}

// F(2x2, 3x3): the 4x4 input tile d into B^T d B, written to v[p * stride] for p = 4i + j.
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <bool kInside, class D>
void InputTile2(D d, const TileAt& t, float* HWY_RESTRICT v) {
  using V = hn::Vec<D>;
  V r[4][4];
#pragma GCC unroll 6
  for (int64_t j = 0; j < 4; ++j) {
    V c[4];
#pragma GCC unroll 6
    for (int64_t i = 0; i < 4; ++i) c[i] = LoadPixel<kInside>(d, t, t.y0 + i, t.x0 + j);
    r[0][j] = hn::Sub(c[0], c[2]);
    r[1][j] = hn::Add(c[1], c[2]);
    r[2][j] = hn::Sub(c[2], c[1]);
    r[3][j] = hn::Sub(c[1], c[3]);
  }
#pragma GCC unroll 6
  for (int64_t i = 0; i < 4; ++i) {
    hn::StoreU(hn::Sub(r[i][0], r[i][2]), d, v + (4 * i + 0) * t.stride);
    hn::StoreU(hn::Add(r[i][1], r[i][2]), d, v + (4 * i + 1) * t.stride);
    hn::StoreU(hn::Sub(r[i][2], r[i][1]), d, v + (4 * i + 2) * t.stride);
    hn::StoreU(hn::Sub(r[i][1], r[i][3]), d, v + (4 * i + 3) * t.stride);
  }
}

// F(4x4, 3x3), Lavin and Gray's matrices, down one column of six:
// B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
template <class D, class V>
HWY_INLINE void InputColumn6(D d, const V* c, V* r) {
  const V two = hn::Set(d, 2.0f), four = hn::Set(d, 4.0f), five = hn::Set(d, 5.0f);
  r[0] = hn::Add(hn::NegMulAdd(five, c[2], hn::Mul(four, c[0])), c[4]);
  const V c34 = hn::Add(c[3], c[4]), c4m3 = hn::Sub(c[4], c[3]), c4m2 = hn::Sub(c[4], c[2]);
  r[1] = hn::NegMulAdd(four, hn::Add(c[1], c[2]), c34);
  r[2] = hn::MulAdd(four, hn::Sub(c[1], c[2]), c4m3);
  r[3] = hn::MulAdd(two, hn::Sub(c[3], c[1]), c4m2);
  r[4] = hn::MulAdd(two, hn::Sub(c[1], c[3]), c4m2);
  r[5] = hn::Add(hn::NegMulAdd(five, c[3], hn::Mul(four, c[1])), c[5]);
}

template <bool kInside, class D>
void InputTile4(D d, const TileAt& t, float* HWY_RESTRICT v) {
  using V = hn::Vec<D>;
  V rows[6][6];  // rows[i][j]: B^T applied down column j of the tile, row i of the result
#pragma GCC unroll 6
  for (int64_t j = 0; j < 6; ++j) {
    V c[6], r[6];
#pragma GCC unroll 6
    for (int64_t i = 0; i < 6; ++i) c[i] = LoadPixel<kInside>(d, t, t.y0 + i, t.x0 + j);
    InputColumn6(d, c, r);
#pragma GCC unroll 6
    for (int64_t i = 0; i < 6; ++i) rows[i][j] = r[i];
  }
#pragma GCC unroll 6
  for (int64_t i = 0; i < 6; ++i) {
    V r[6];
    InputColumn6(d, rows[i], r);
#pragma GCC unroll 6
    for (int64_t j = 0; j < 6; ++j) hn::StoreU(r[j], d, v + (6 * i + j) * t.stride);
  }
}

template <class D>
HWY_INLINE hn::Vec<D> ApplyPostOps(D d, hn::Vec<D> value, std::span<const WinogradPostOp> ops,
                                   const float* residual) {
  using Kind = WinogradPostOp::Kind;
  for (const WinogradPostOp& op : ops) {
    switch (op.kind) {
      case Kind::kAdd:
        value = hn::Add(value, hn::LoadU(d, residual));
        break;
      case Kind::kRelu:
        value = hn::Max(value, hn::Zero(d));
        break;
      case Kind::kLeakyRelu:
        value = hn::IfThenElse(hn::Lt(value, hn::Zero(d)), hn::Mul(value, hn::Set(d, op.alpha)), value);
        break;
      case Kind::kClip:
        value = hn::Min(hn::Max(value, hn::Set(d, op.alpha)), hn::Set(d, op.beta));
        break;
    }
  }
  return value;
}

// Where a tile's outputs go, and what they get after the transform.
struct OutputAt {
  float* plane;           // the group's first channel of pixel (0, 0) of the tile's image in y
  const float* residual;  // the same place in the residual, or null
  const float* bias;      // the group's
  std::span<const WinogradPostOp> post_ops;
};

// One output row of a tile, `count` vectors from x0 on, clipped to the image width.
template <class D>
HWY_INLINE void StoreRow(D d, const hn::Vec<D>* row, int64_t count, const TileAt& t, const OutputAt& o,
                         int64_t y) {
  const auto bias = hn::LoadU(d, o.bias);
  for (int64_t j = 0; j < count && t.x0 + j < t.w; ++j) {
    const int64_t offset = (y * t.w + t.x0 + j) * t.pixel_stride;
    const float* residual = o.residual ? o.residual + offset : nullptr;
    hn::StoreU(ApplyPostOps(d, hn::Add(row[j], bias), o.post_ops, residual), d, o.plane + offset);
  }
}

// F(2x2, 3x3): products m[p * stride] (p = 4i + j) into A^T m A, the 2x2 outputs at (y0, x0).
// A^T = [1 1 1 0; 0 1 -1 -1].
template <class D>
HWY_NOINLINE void OutputTile2(D d, const float* HWY_RESTRICT m, const TileAt& t, const OutputAt& o) {
  using V = hn::Vec<D>;
  V s[2][4];
#pragma GCC unroll 6
  for (int64_t j = 0; j < 4; ++j) {
    const V m0 = hn::LoadU(d, m + (0 + j) * t.stride), m1 = hn::LoadU(d, m + (4 + j) * t.stride);
    const V m2 = hn::LoadU(d, m + (8 + j) * t.stride), m3 = hn::LoadU(d, m + (12 + j) * t.stride);
    s[0][j] = hn::Add(hn::Add(m0, m1), m2);
    s[1][j] = hn::Sub(hn::Sub(m1, m2), m3);
  }
#pragma GCC unroll 6
  for (int64_t i = 0; i < 2; ++i) {
    if (t.y0 + i >= t.h) continue;  // below the image (a constant trip count keeps the loop unrolled)
    const V row[2] = {hn::Add(hn::Add(s[i][0], s[i][1]), s[i][2]),
                      hn::Sub(hn::Sub(s[i][1], s[i][2]), s[i][3])};
    StoreRow(d, row, 2, t, o, t.y0 + i);
  }
}

// F(4x4, 3x3) down one column of six: A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
template <class D, class V>
HWY_INLINE void OutputColumn6(D d, const V* m, V* o) {
  const V a = hn::Add(m[1], m[2]), b = hn::Sub(m[1], m[2]);
  const V c = hn::Add(m[3], m[4]), e = hn::Sub(m[3], m[4]);
  o[0] = hn::Add(hn::Add(m[0], a), c);
  o[1] = hn::MulAdd(hn::Set(d, 2.0f), e, b);
  o[2] = hn::MulAdd(hn::Set(d, 4.0f), c, a);
  o[3] = hn::Add(hn::MulAdd(hn::Set(d, 8.0f), e, b), m[5]);
}

template <class D>
HWY_NOINLINE void OutputTile4(D d, const float* HWY_RESTRICT m, const TileAt& t, const OutputAt& o) {
  using V = hn::Vec<D>;
  V cols[4][6];  // cols[i][j]: A^T applied down column j of the products, row i of the result
#pragma GCC unroll 6
  for (int64_t j = 0; j < 6; ++j) {
    V column[6], out[4];
#pragma GCC unroll 6
    for (int64_t i = 0; i < 6; ++i) column[i] = hn::LoadU(d, m + (6 * i + j) * t.stride);
    OutputColumn6(d, column, out);
#pragma GCC unroll 6
    for (int64_t i = 0; i < 4; ++i) cols[i][j] = out[i];
  }
#pragma GCC unroll 6
  for (int64_t i = 0; i < 4; ++i) {
    if (t.y0 + i >= t.h) continue;
    V row[4];
    OutputColumn6(d, cols[i], row);
    StoreRow(d, row, 4, t, o, t.y0 + i);
  }
}

// The channels a vector holds: the target's vector, at most the layout's block, and a divisor of
// `channels` (24 input channels in nChw16c go 8 at a time).
int64_t GroupWidth(int64_t channels, int64_t layout_block) {
  auto width = static_cast<int64_t>(std::min<size_t>(HWY_LANES(float), 16));
  while (width > 1 && (width > layout_block || channels % width != 0)) width /= 2;
  return width;
}

// Calls body(tag) with a tag of `width` lanes (a power of two the target holds).
template <class Body>
void WithGroupTag(int64_t width, const Body& body) {
  if constexpr (HWY_LANES(float) >= 16) {
    if (width == 16) return body(hn::CappedTag<float, 16>());
  }
  if constexpr (HWY_LANES(float) >= 8) {
    if (width == 8) return body(hn::CappedTag<float, 8>());
  }
  if constexpr (HWY_LANES(float) >= 4) {
    if (width == 4) return body(hn::CappedTag<float, 4>());
  }
  if constexpr (HWY_LANES(float) >= 2) {
    if (width == 2) return body(hn::CappedTag<float, 2>());
  }
  body(hn::CappedTag<float, 1>());
}

// Where group `group` (of `width` channels) of image n starts in a blocked tensor of `channels`
// channels and `pixels` pixels: its layout block, and the group's place inside it.
int64_t GroupOffset(const WinogradGeometry& g, int64_t n, int64_t group, int64_t width, int64_t channels,
                    int64_t pixels) {
  const int64_t blocks = (channels + g.layout_block - 1) / g.layout_block, channel = group * width;
  return ((n * blocks + channel / g.layout_block) * pixels) * g.layout_block + channel % g.layout_block;
}

// Work items [begin, end) of a chunk of `tiles` tiles from `first_tile`: item = group x tiles +
// (tile - first_tile).
void InputItems(const WinogradGeometry& g, const float* x, int64_t width, int64_t first_tile, int64_t tiles,
                int64_t begin, int64_t end, float* v) {
  const int64_t tiles_h = (g.out_h + g.tile - 1) / g.tile, tiles_w = (g.out_w + g.tile - 1) / g.tile;
  WithGroupTag(width, [&](auto d) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = item / tiles, local = item % tiles, tile = first_tile + local;
      const int64_t n = tile / (tiles_h * tiles_w), th = tile / tiles_w % tiles_h, tw = tile % tiles_w;
      const TileAt t{.plane = x + GroupOffset(g, n, group, width, g.in_channels, g.in_h * g.in_w),
                     .h = g.in_h,
                     .w = g.in_w,
                     .pixel_stride = g.layout_block,
                     .y0 = g.tile * th - g.pad_top,
                     .x0 = g.tile * tw - g.pad_left,
                     .stride = tiles * g.in_channels};
      float* tile_v = v + local * g.in_channels + group * width;
      const int64_t side = g.tile + 2;
      const bool inside = t.y0 >= 0 && t.x0 >= 0 && t.y0 + side <= t.h && t.x0 + side <= t.w;
      if (g.tile == 2) {
        inside ? InputTile2<true>(d, t, tile_v) : InputTile2<false>(d, t, tile_v);
      } else {
        inside ? InputTile4<true>(d, t, tile_v) : InputTile4<false>(d, t, tile_v);
      }
    }
  });
}

void OutputItems(const WinogradGeometry& g, const float* m, int64_t width, int64_t first_tile, int64_t tiles,
                 int64_t begin, int64_t end, const float* bias, std::span<const WinogradPostOp> post_ops,
                 const float* residual, float* y) {
  const int64_t tiles_h = (g.out_h + g.tile - 1) / g.tile, tiles_w = (g.out_w + g.tile - 1) / g.tile;
  WithGroupTag(width, [&](auto d) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = item / tiles, local = item % tiles, tile = first_tile + local;
      const int64_t n = tile / (tiles_h * tiles_w), th = tile / tiles_w % tiles_h, tw = tile % tiles_w;
      const int64_t offset = GroupOffset(g, n, group, width, g.out_channels, g.out_h * g.out_w);
      const TileAt t{.plane = nullptr,
                     .h = g.out_h,
                     .w = g.out_w,
                     .pixel_stride = g.layout_block,
                     .y0 = g.tile * th,
                     .x0 = g.tile * tw,
                     .stride = tiles * g.out_channels};
      const OutputAt o{.plane = y + offset,
                       .residual = residual ? residual + offset : nullptr,
                       .bias = bias + group * width,
                       .post_ops = post_ops};
      const float* tile_m = m + local * g.out_channels + group * width;
      if (g.tile == 2) {
        OutputTile2(d, tile_m, t, o);
      } else {
        OutputTile4(d, tile_m, t, o);
      }
    }
  });
}

// A chunk's transforms, parallel over (group, tile) items on the intra-op threads.
void TransformInputOnTarget(const WinogradGeometry& g, const float* x, int64_t first_tile, int64_t tiles,
                            float* v) {
  const int64_t width = GroupWidth(g.in_channels, g.layout_block);
  ParallelFor(g.in_channels / width * tiles,
              [&](int64_t begin, int64_t end) { InputItems(g, x, width, first_tile, tiles, begin, end, v); });
}

void TransformOutputOnTarget(const WinogradGeometry& g, const float* m, int64_t first_tile, int64_t tiles,
                             const float* bias, std::span<const WinogradPostOp> post_ops,
                             const float* residual, float* y) {
  const int64_t width = GroupWidth(g.out_channels, g.layout_block);
  ParallelFor(g.out_channels / width * tiles, [&](int64_t begin, int64_t end) {
    OutputItems(g, m, width, first_tile, tiles, begin, end, bias, post_ops, residual, y);
  });
}

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace inferd::runtime::simd {

HWY_EXPORT(TransformInputOnTarget);
HWY_EXPORT(TransformOutputOnTarget);

void WinogradTransformInput(const WinogradGeometry& geometry, const float* x, int64_t first_tile,
                            int64_t tiles, float* v) {
  HWY_DYNAMIC_DISPATCH(TransformInputOnTarget)(geometry, x, first_tile, tiles, v);
}

void WinogradTransformOutput(const WinogradGeometry& geometry, const float* m, int64_t first_tile,
                             int64_t tiles, const float* bias, std::span<const WinogradPostOp> post_ops,
                             const float* residual, float* y) {
  HWY_DYNAMIC_DISPATCH(TransformOutputOnTarget)(geometry, m, first_tile, tiles, bias, post_ops, residual, y);
}

}  // namespace inferd::runtime::simd
#endif
