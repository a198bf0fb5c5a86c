#include "runtime/kernels/dnnl/dnnl_winograd.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/kernels/simd/winograd_transforms.h"
#include "runtime/threading.h"

namespace inferd::runtime::dnnl_kernels {
namespace {

// Input channels come in groups of 8 at least (every target's transforms hold one group in a
// vector of at most 16 lanes that divides the channel count; 8 keeps 16-lane targets at 8 or 16).
constexpr int64_t kChannelMultiple = 8;
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

// [positions] x [tiles, C] x [C, K], all plain. Fixed sizes (one primitive for full chunks, one
// for the last): oneDNN's GEMM with a run-time M measured slower.
dnnl::matmul MakeProducts(int64_t positions, int64_t tiles, int64_t c, int64_t k) {
  const dnnl::memory::desc v = PlainDesc({positions, tiles, c}), u = PlainDesc({positions, c, k});
  const dnnl::memory::desc m = PlainDesc({positions, tiles, k});
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(v, u, m), OwnScratchpad(), Engine()));
}

}  // namespace

bool WinogradConv::Applies(const Shape& x_shape, const Shape& w_shape, int64_t group,
                           const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                           const std::vector<int64_t>& pads, const std::vector<PostOp>& post_ops,
                           int64_t layout_block) {
  if (x_shape.size() != 4 || w_shape.size() != 4 || group != 1) return false;
  if (layout_block != 8 && layout_block != 16) return false;
  // Filters fill whole layout blocks: the transforms write no padding channel, which must be zero.
  if (w_shape[2] != 3 || w_shape[3] != 3 || x_shape[1] % kChannelMultiple != 0 ||
      w_shape[0] % layout_block != 0)
    return false;
  for (int64_t s : strides)
    if (s != 1) return false;
  for (int64_t d : dilations)
    if (d != 1) return false;
  for (int64_t p : pads)
    if (p < 0 || p > 2) return false;
  for (const PostOp& op : post_ops) {
    using K = PostOp::Kind;
    if (op.kind != K::kAdd && op.kind != K::kRelu && op.kind != K::kLeakyRelu && op.kind != K::kClip)
      return false;
  }
  return true;
}

StatusOr<std::unique_ptr<WinogradConv>> WinogradConv::Create(const WinogradShape& shape,
                                                             std::vector<PostOp> post_ops, int tile,
                                                             int64_t max_chunk_tiles) {
  if (shape.out_h < 1 || shape.out_w < 1) return Status::InvalidArgument("Winograd: empty output");
  if (tile != 2 && tile != 4) return Status::InvalidArgument("Winograd: output tiles are 2x2 or 4x4");
  if (shape.layout_block != 8 && shape.layout_block != 16) {
    return Status::InvalidArgument("Winograd: the layout's channel block is 8 or 16");
  }
  const int64_t positions = (tile + 2) * (tile + 2);
  const int64_t tiles = shape.batch * ((shape.out_h + tile - 1) / tile) * ((shape.out_w + tile - 1) / tile);
  int64_t chunk =
      std::max(kMinChunkTiles, kScratchFloats / (positions * (shape.in_channels + shape.out_channels)));
  if (max_chunk_tiles > 0) chunk = max_chunk_tiles;
  chunk = std::min(chunk, tiles);
  std::unique_ptr<WinogradConv> conv(new WinogradConv(shape, post_ops, tile, chunk));
  RETURN_IF_ERROR(Guarded("Winograd", [&] {
    conv->products_ = MakeProducts(positions, chunk, shape.in_channels, shape.out_channels);
    if (const int64_t tail = tiles % chunk; tail != 0) {
      conv->tail_products_ = MakeProducts(positions, tail, shape.in_channels, shape.out_channels);
    }
    return Status::Ok();
  }));
  return conv;
}

namespace {

// The post-ops Applies admitted, for the transforms.
std::vector<simd::WinogradPostOp> TransformPostOps(const std::vector<PostOp>& post_ops) {
  using Kind = simd::WinogradPostOp::Kind;
  std::vector<simd::WinogradPostOp> ops;
  for (const PostOp& op : post_ops) {
    switch (op.kind) {
      case PostOp::Kind::kAdd:
        ops.push_back({.kind = Kind::kAdd});
        break;
      case PostOp::Kind::kRelu:
        ops.push_back({.kind = Kind::kRelu});
        break;
      case PostOp::Kind::kLeakyRelu:
        ops.push_back({.kind = Kind::kLeakyRelu, .alpha = op.alpha});
        break;
      case PostOp::Kind::kClip:
        ops.push_back({.kind = Kind::kClip, .alpha = op.alpha, .beta = op.beta});
        break;
      default:
        break;  // Applies admits no other kind
    }
  }
  return ops;
}

}  // namespace

WinogradConv::WinogradConv(const WinogradShape& shape, const std::vector<PostOp>& post_ops, int tile,
                           int64_t chunk_tiles)
    : shape_(shape),
      post_ops_(TransformPostOps(post_ops)),
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
        for (int j = 0; j < 3; ++j)
          gt[i][j] = g_at(i, 0) * g[j] + g_at(i, 1) * g[3 + j] + g_at(i, 2) * g[6 + j];
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          u[((n * i + j) * c_count + c) * k_count + k] =
              gt[i][0] * g_at(j, 0) + gt[i][1] * g_at(j, 1) + gt[i][2] * g_at(j, 2);
        }
      }
    }
  }
  return transformed;
}

simd::WinogradGeometry WinogradConv::Geometry() const {
  return {.tile = tile_,
          .in_channels = shape_.in_channels,
          .out_channels = shape_.out_channels,
          .in_h = shape_.in_h,
          .in_w = shape_.in_w,
          .out_h = shape_.out_h,
          .out_w = shape_.out_w,
          .pad_top = shape_.pad_top,
          .pad_left = shape_.pad_left,
          .layout_block = shape_.layout_block};
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
      simd::WinogradTransformInput(Geometry(), x, first, tiles, v);
      dnnl::matmul& products = tiles == chunk_tiles_ ? products_ : tail_products_;
      RunPrimitive(products, {{DNNL_ARG_SRC, Wrap(PlainDesc({positions_, tiles, c}), v)},
                              {DNNL_ARG_WEIGHTS, transformed_weights},
                              {DNNL_ARG_DST, Wrap(PlainDesc({positions_, tiles, k}), m)}});
      stream.wait();
      simd::WinogradTransformOutput(Geometry(), m, first, tiles, bias, post_ops_, residual, y);
    }
    return Status::Ok();
  });
}

}  // namespace inferd::runtime::dnnl_kernels
