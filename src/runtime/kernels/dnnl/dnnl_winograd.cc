#include "runtime/kernels/dnnl/dnnl_winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/kernels/vector_math.h"
#include "runtime/threading.h"

namespace inferd::runtime::dnnl_kernels {
namespace {

#define INFERD_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kBlock = 8;  // channels per transformed group: one AVX2 vector
// Scratch per chunk of tiles, transformed inputs and products together (floats): 4 MB, so that a
// chunk's V and M stay in the last-level cache between the three steps.
constexpr int64_t kScratchFloats = int64_t{1} << 20;
constexpr int64_t kMinChunkTiles = 32;  // fewer rows and the matmul runs below its speed

// The chunk's transformed inputs and products, reused by every Winograd convolution on the thread
// (a model instance thread runs one at a time); bounded by kScratchFloats (or one minimum chunk).
// Cache-line aligned: the matmul ran ~1.5x slower on malloc's 16-byte alignment.
float* ThreadScratch(size_t floats) {
  thread_local std::unique_ptr<float, decltype(&std::free)> scratch(nullptr, &std::free);
  thread_local size_t capacity = 0;
  if (floats > capacity) {
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    scratch.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    capacity = scratch ? floats : 0;
  }
  return scratch.get();
}

// The 8 channels of pixel (y, x) of one group; zero outside the image (padding). Pixels are
// `pixel_stride` floats apart: the layout's channel block (8 or 16, a group is half of a 16 block).
INFERD_AVX2 inline __m256 LoadPixel(const float* plane, int64_t h, int64_t w, int64_t pixel_stride, int64_t y,
                                    int64_t x) {
  return y >= 0 && y < h && x >= 0 && x < w ? _mm256_loadu_ps(plane + (y * w + x) * pixel_stride)
                                            : _mm256_setzero_ps();
}

// Input tile (n, th, tw) of one channel block: 4x4 vectors d, zero outside the image, into
// B^T d B, written to v[p * stride] for p = 4i + j.
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
INFERD_AVX2 void TransformInputTile2(const float* plane, int64_t h, int64_t w, int64_t pixel_stride, int64_t y0,
                                     int64_t x0, float* v, int64_t stride) {
  __m256 d[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) d[i][j] = LoadPixel(plane, h, w, pixel_stride, y0 + i, x0 + j);
  __m256 r[4][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
    r[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
    r[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
    r[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(v + (4 * i + 0) * stride, _mm256_sub_ps(r[i][0], r[i][2]));
    _mm256_storeu_ps(v + (4 * i + 1) * stride, _mm256_add_ps(r[i][1], r[i][2]));
    _mm256_storeu_ps(v + (4 * i + 2) * stride, _mm256_sub_ps(r[i][2], r[i][1]));
    _mm256_storeu_ps(v + (4 * i + 3) * stride, _mm256_sub_ps(r[i][1], r[i][3]));
  }
}

INFERD_AVX2 __m256 ApplyPostOps(__m256 value, const std::vector<PostOp>& ops, const float* residual) {
  for (const PostOp& op : ops) {
    switch (op.kind) {
      case PostOp::Kind::kAdd:
        value = _mm256_add_ps(value, _mm256_loadu_ps(residual));
        break;
      case PostOp::Kind::kRelu:
        value = _mm256_max_ps(value, _mm256_setzero_ps());
        break;
      case PostOp::Kind::kLeakyRelu: {
        const __m256 negative = _mm256_cmp_ps(value, _mm256_setzero_ps(), _CMP_LT_OQ);
        value = _mm256_blendv_ps(value, _mm256_mul_ps(value, _mm256_set1_ps(op.alpha)), negative);
        break;
      }
      case PostOp::Kind::kClip:
        value = _mm256_min_ps(_mm256_max_ps(value, _mm256_set1_ps(op.alpha)), _mm256_set1_ps(op.beta));
        break;
      default:
        break;  // Applies() admits no other kind
    }
  }
  return value;
}

// One output row of a tile, `count` vectors from x0 on, clipped to the image width: bias, then
// the post-ops (an Add reads the residual at the same place).
INFERD_AVX2 void StoreOutputRow(const __m256* out, int count, __m256 bias, const std::vector<PostOp>& ops,
                                const float* residual_plane, float* plane, int64_t w, int64_t pixel_stride, int64_t y,
                                int64_t x0) {
  for (int j = 0; j < count && x0 + j < w; ++j) {
    const int64_t offset = (y * w + x0 + j) * pixel_stride;
    const float* residual = residual_plane ? residual_plane + offset : nullptr;
    _mm256_storeu_ps(plane + offset, ApplyPostOps(_mm256_add_ps(out[j], bias), ops, residual));
  }
}

// Products m[p * stride] (p = 4i + j) of one tile and channel block into A^T m A, the 2x2
// outputs at (y0, x0), clipped to the image; bias and post-ops applied.
// A^T = [1 1 1 0; 0 1 -1 -1].
INFERD_AVX2 void TransformOutputTile2(const float* m, int64_t stride, const float* bias, const std::vector<PostOp>& ops,
                                      const float* residual_plane, float* plane, int64_t h, int64_t w,
                                      int64_t pixel_stride, int64_t y0, int64_t x0) {
  __m256 s[2][4];
  for (int j = 0; j < 4; ++j) {
    const __m256 m0 = _mm256_loadu_ps(m + (0 + j) * stride), m1 = _mm256_loadu_ps(m + (4 + j) * stride);
    const __m256 m2 = _mm256_loadu_ps(m + (8 + j) * stride), m3 = _mm256_loadu_ps(m + (12 + j) * stride);
    s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  const __m256 b = _mm256_loadu_ps(bias);
  for (int i = 0; i < 2; ++i) {
    const int64_t y = y0 + i;
    if (y >= h) break;
    const __m256 out[2] = {_mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]),
                           _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3])};
    StoreOutputRow(out, 2, b, ops, residual_plane, plane, w, pixel_stride, y, x0);
  }
}

// [positions] x [tiles, C] x [C, K], all plain. Fixed sizes (one primitive for full chunks, one
// for the last): oneDNN's GEMM with a run-time M measured slower.
dnnl::matmul MakeProducts(int64_t positions, int64_t tiles, int64_t c, int64_t k) {
  const dnnl::memory::desc v = PlainDesc({positions, tiles, c}), u = PlainDesc({positions, c, k});
  const dnnl::memory::desc m = PlainDesc({positions, tiles, k});
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(v, u, m), OwnScratchpad(), Engine()));
}

// F(4x4, 3x3): 6x6 input tiles, 36 products, 4x4 outputs (Lavin and Gray's matrices).
// B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
INFERD_AVX2 inline void InputColumn6(const __m256 d[6], __m256 r[6]) {
  const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), five = _mm256_set1_ps(5);
  r[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);
  const __m256 d34 = _mm256_add_ps(d[3], d[4]), d4m3 = _mm256_sub_ps(d[4], d[3]);
  r[1] = _mm256_sub_ps(d34, _mm256_mul_ps(four, _mm256_add_ps(d[1], d[2])));
  r[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), d4m3);
  r[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[3], d[1]), _mm256_sub_ps(d[4], d[2]));
  r[4] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[1], d[3]), _mm256_sub_ps(d[4], d[2]));
  r[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);
}

INFERD_AVX2 void TransformInputTile4(const float* plane, int64_t h, int64_t w, int64_t pixel_stride, int64_t y0,
                                     int64_t x0, float* v, int64_t stride) {
  __m256 rows[6][6];  // rows[i] = B^T applied down column j of the tile, for every j
  for (int j = 0; j < 6; ++j) {
    __m256 d[6];
    for (int i = 0; i < 6; ++i) d[i] = LoadPixel(plane, h, w, pixel_stride, y0 + i, x0 + j);
    __m256 r[6];
    InputColumn6(d, r);
    for (int i = 0; i < 6; ++i) rows[i][j] = r[i];
  }
  for (int i = 0; i < 6; ++i) {
    __m256 r[6];
    InputColumn6(rows[i], r);
    for (int j = 0; j < 6; ++j) _mm256_storeu_ps(v + (6 * i + j) * stride, r[j]);
  }
}

// A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
INFERD_AVX2 inline void OutputColumn6(const __m256 m[6], __m256 o[4]) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2), d, b);
  o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4), c, a);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8), d, b), m[5]);
}

INFERD_AVX2 void TransformOutputTile4(const float* m, int64_t stride, const float* bias, const std::vector<PostOp>& ops,
                                      const float* residual_plane, float* plane, int64_t h, int64_t w,
                                      int64_t pixel_stride, int64_t y0, int64_t x0) {
  __m256 cols[4][6];  // A^T applied down each column j of the 6x6 products
  for (int j = 0; j < 6; ++j) {
    __m256 column[6], o[4];
    for (int i = 0; i < 6; ++i) column[i] = _mm256_loadu_ps(m + (6 * i + j) * stride);
    OutputColumn6(column, o);
    for (int i = 0; i < 4; ++i) cols[i][j] = o[i];
  }
  const __m256 b = _mm256_loadu_ps(bias);
  for (int i = 0; i < 4; ++i) {
    const int64_t y = y0 + i;
    if (y >= h) break;
    __m256 out[4];
    OutputColumn6(cols[i], out);
    StoreOutputRow(out, 4, b, ops, residual_plane, plane, w, pixel_stride, y, x0);
  }
}

}  // namespace

bool WinogradConv::CpuSupported() { return CpuHasAvx2Fma(); }

bool WinogradConv::Applies(const Shape& x_shape, const Shape& w_shape, int64_t group, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                           const std::vector<PostOp>& post_ops, int64_t layout_block) {
  if (!CpuSupported() || x_shape.size() != 4 || w_shape.size() != 4 || group != 1) return false;
  if (layout_block != 8 && layout_block != 16) return false;
  // Filters fill whole layout blocks: the transforms write no padding channel, which must be zero.
  if (w_shape[2] != 3 || w_shape[3] != 3 || x_shape[1] % kBlock != 0 || w_shape[0] % layout_block != 0) return false;
  for (int64_t s : strides) if (s != 1) return false;
  for (int64_t d : dilations) if (d != 1) return false;
  for (int64_t p : pads) if (p < 0 || p > 2) return false;
  for (const PostOp& op : post_ops) {
    using K = PostOp::Kind;
    if (op.kind != K::kAdd && op.kind != K::kRelu && op.kind != K::kLeakyRelu && op.kind != K::kClip) return false;
  }
  return true;
}

StatusOr<std::unique_ptr<WinogradConv>> WinogradConv::Create(const WinogradShape& shape, std::vector<PostOp> post_ops,
                                                             int tile, int64_t max_chunk_tiles) {
  if (shape.out_h < 1 || shape.out_w < 1) return Status::InvalidArgument("Winograd: empty output");
  if (tile != 2 && tile != 4) return Status::InvalidArgument("Winograd: output tiles are 2x2 or 4x4");
  if (shape.layout_block != 8 && shape.layout_block != 16) {
    return Status::InvalidArgument("Winograd: the layout's channel block is 8 or 16");
  }
  const int64_t positions = (tile + 2) * (tile + 2);
  const int64_t tiles = shape.batch * ((shape.out_h + tile - 1) / tile) * ((shape.out_w + tile - 1) / tile);
  int64_t chunk = std::max(kMinChunkTiles, kScratchFloats / (positions * (shape.in_channels + shape.out_channels)));
  if (max_chunk_tiles > 0) chunk = max_chunk_tiles;
  chunk = std::min(chunk, tiles);
  std::unique_ptr<WinogradConv> conv(new WinogradConv(shape, std::move(post_ops), tile, chunk));
  RETURN_IF_ERROR(Guarded("Winograd", [&] {
    conv->products_ = MakeProducts(positions, chunk, shape.in_channels, shape.out_channels);
    if (const int64_t tail = tiles % chunk; tail != 0) {
      conv->tail_products_ = MakeProducts(positions, tail, shape.in_channels, shape.out_channels);
    }
    return Status::Ok();
  }));
  return conv;
}

WinogradConv::WinogradConv(const WinogradShape& shape, std::vector<PostOp> post_ops, int tile, int64_t chunk_tiles)
    : shape_(shape),
      post_ops_(std::move(post_ops)),
      tile_(tile),
      positions_((tile + 2) * (tile + 2)),
      tiles_h_((shape.out_h + tile - 1) / tile),
      tiles_w_((shape.out_w + tile - 1) / tile),
      tiles_(shape.batch * tiles_h_ * tiles_w_),
      chunk_tiles_(chunk_tiles) {}

// U = G g G^T per (output, input) channel pair, stored [p][c][k] as the matmul's weights. G is
// [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] for 2x2 outputs and Lavin and Gray's 6x3 for 4x4.
StatusOr<dnnl::memory> WinogradConv::TransformWeights(const float* weights, int tile, int64_t in_channels,
                                                      int64_t out_channels) {
  static constexpr float kG2[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float kG4[6][3] = {{1.0f / 4, 0, 0},
                                      {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                      {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                      {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                      {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                      {0, 0, 1}};
  if (tile != 2 && tile != 4) return Status::InvalidArgument("Winograd: output tiles are 2x2 or 4x4");
  const int n = tile + 2;
  auto g_at = [&](int i, int j) { return tile == 2 ? kG2[i][j] : kG4[i][j]; };
  const int64_t c_count = in_channels, k_count = out_channels;
  dnnl::memory transformed;
  RETURN_IF_ERROR(Guarded("Winograd", [&] {
    transformed = dnnl::memory(PlainDesc({n * n, c_count, k_count}), Engine());  // aligned, unlike a vector
    return Status::Ok();
  }));
  float* u = static_cast<float*>(transformed.get_data_handle());
  for (int64_t k = 0; k < k_count; ++k) {
    for (int64_t c = 0; c < c_count; ++c) {
      const float* g = weights + (k * c_count + c) * 9;
      float gt[6][3];  // G g
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < 3; ++j) gt[i][j] = g_at(i, 0) * g[j] + g_at(i, 1) * g[3 + j] + g_at(i, 2) * g[6 + j];
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          u[((n * i + j) * c_count + c) * k_count + k] = gt[i][0] * g_at(j, 0) + gt[i][1] * g_at(j, 1) + gt[i][2] * g_at(j, 2);
        }
      }
    }
  }
  return transformed;
}

// Runs fn(block, local, n, th, tw) for every (channel block, tile of the chunk) pair, split over
// the intra-op threads; `local` counts tiles from the chunk's first, (n, th, tw) place the tile.
template <typename Fn>
void WinogradConv::ForEachTile(int64_t blocks, int64_t first_tile, int64_t tiles, const Fn& fn) const {
  ParallelFor(blocks * tiles, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t block = item / tiles, local = item % tiles, tile = first_tile + local;
      fn(block, local, tile / (tiles_h_ * tiles_w_), tile / tiles_w_ % tiles_h_, tile % tiles_w_);
    }
  });
}

// Where 8-channel group `group` of image n starts in a blocked tensor of `channels` channels and
// `pixels` pixels: its layout block, and the group's place inside it.
int64_t WinogradConv::GroupOffset(int64_t n, int64_t group, int64_t channels, int64_t pixels) const {
  const int64_t layout_blocks = (channels + shape_.layout_block - 1) / shape_.layout_block, channel = group * kBlock;
  return ((n * layout_blocks + channel / shape_.layout_block) * pixels) * shape_.layout_block + channel % shape_.layout_block;
}

// V[p][tile][c] for the chunk's tiles.
void WinogradConv::TransformInput(const float* x, int64_t first_tile, int64_t tiles, float* v) const {
  const int64_t groups = shape_.in_channels / kBlock, stride = tiles * shape_.in_channels;
  const auto transform = tile_ == 2 ? &TransformInputTile2 : &TransformInputTile4;
  ForEachTile(groups, first_tile, tiles, [&](int64_t group, int64_t local, int64_t n, int64_t th, int64_t tw) {
    transform(x + GroupOffset(n, group, shape_.in_channels, shape_.in_h * shape_.in_w), shape_.in_h, shape_.in_w,
              shape_.layout_block, tile_ * th - shape_.pad_top, tile_ * tw - shape_.pad_left,
              v + local * shape_.in_channels + group * kBlock, stride);
  });
}

void WinogradConv::TransformOutput(const float* m, int64_t first_tile, int64_t tiles, const float* bias,
                                   const float* residual, float* y) const {
  const int64_t groups = shape_.out_channels / kBlock, stride = tiles * shape_.out_channels;
  const auto transform = tile_ == 2 ? &TransformOutputTile2 : &TransformOutputTile4;
  ForEachTile(groups, first_tile, tiles, [&](int64_t group, int64_t local, int64_t n, int64_t th, int64_t tw) {
    const int64_t offset = GroupOffset(n, group, shape_.out_channels, shape_.out_h * shape_.out_w);
    transform(m + local * shape_.out_channels + group * kBlock, stride, bias + group * kBlock, post_ops_,
              residual ? residual + offset : nullptr, y + offset, shape_.out_h, shape_.out_w, shape_.layout_block, tile_ * th,
              tile_ * tw);
  });
}

Status WinogradConv::Run(const float* x, const dnnl::memory& transformed_weights, const float* bias,
                         const float* residual, float* y) {
  if (bias == nullptr) {
    if (zero_bias_.empty()) zero_bias_.assign(shape_.out_channels, 0.0f);
    bias = zero_bias_.data();
  }
  const int64_t c = shape_.in_channels, k = shape_.out_channels;
  float* v = ThreadScratch(positions_ * chunk_tiles_ * (c + k));
  if (v == nullptr) return Status::ResourceExhausted("Winograd: no memory for the transformed tiles");
  float* m = v + positions_ * chunk_tiles_ * c;
  return Guarded("Winograd", [&] {
    dnnl::stream& stream = ThreadStream();
    for (int64_t first = 0; first < tiles_; first += chunk_tiles_) {
      const int64_t tiles = std::min(chunk_tiles_, tiles_ - first);
      TransformInput(x, first, tiles, v);
      dnnl::matmul& products = tiles == chunk_tiles_ ? products_ : tail_products_;
      RunPrimitive(products, {{DNNL_ARG_SRC, Wrap(PlainDesc({positions_, tiles, c}), v)},
                              {DNNL_ARG_WEIGHTS, transformed_weights},
                              {DNNL_ARG_DST, Wrap(PlainDesc({positions_, tiles, k}), m)}});
      stream.wait();
      TransformOutput(m, first, tiles, bias, residual, y);
    }
    return Status::Ok();
  });
}

}  // namespace inferd::runtime::dnnl_kernels
