// 3x3 convolution by Winograd's minimal filtering: F(2x2, 3x3) makes each 2x2 block of outputs
// from a 4x4 input tile with 16 multiplications per channel pair instead of 36; F(4x4, 3x3) each
// 4x4 block from a 6x6 tile with 36 instead of 144, at the cost of larger transforms and of
// rounding (relative error ~1e-5 against ~1e-6; both well inside what the model tests allow).
//
// Why we write it: oneDNN 2.6 (Debian's) has Winograd only for AVX-512; on AVX2 its direct
// kernels run resnet's 3x3 layers at 90-150 GFLOP/s. Here the products of all tiles are one
// batched oneDNN matmul ([16 or 36] x [tiles, C] x [C, K]) and only the transforms are ours
// (simd/winograd_transforms.h: one Highway source, 16 channels a vector on AVX-512). It is
// offered to the Conv kernel's tuning as one more candidate, so it runs only on the layers where
// it measured faster (on this machine: >= 128 channels; at 64 channels and 56x56 the transforms'
// memory traffic eats the gain).
//
// Layouts: input, output and residual in oneDNN's nChw8c or nChw16c (the block ChannelBlock timed),
// which layout propagation gives a chain of convolutions; the transforms take a vector's width of
// channels at a time (at most the block). Weights as ONNX has them, [K, C, 3, 3].
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/simd/winograd_transforms.h"

namespace inferd::runtime::dnnl_kernels {

struct WinogradShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;
  int64_t layout_block = 8;  // the blocked layout's channel block: 8 (nChw8c) or 16 (nChw16c)
};

class WinogradConv {
 public:
  // Whether F(2x2, 3x3) can run this convolution: 3x3, stride 1, no dilation, one group, input
  // channels in multiples of 8 and filters in multiples of `layout_block` (8 or 16), pads <= 2,
  // only the post-ops it applies itself (a residual Add, Relu, LeakyRelu, Clip).
  static bool Applies(const Shape& x_shape, const Shape& w_shape, int64_t group,
                      const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                      const std::vector<int64_t>& pads, const std::vector<PostOp>& post_ops,
                      int64_t layout_block);

  // `tile`: the output block, 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)). `max_chunk_tiles` > 0
  // overrides how many tiles go through the three steps at a time (tests).
  static StatusOr<std::unique_ptr<WinogradConv>> Create(const WinogradShape& shape,
                                                        std::vector<PostOp> post_ops, int tile,
                                                        int64_t max_chunk_tiles = 0);

  // The weights [K, C, 3, 3] transformed for `tile`: U [positions][C][K]. Kept by the caller, which
  // shares them between the plans for different batch sizes (U is 16/9 or 4 times the weights).
  static StatusOr<dnnl::memory> TransformWeights(const float* weights, int tile, int64_t in_channels,
                                                 int64_t out_channels);

  int tile() const { return tile_; }

  // y = conv(x) + bias, then the post-ops (an Add reads `residual`, laid out as y), with U from
  // TransformWeights for this tile and shape.
  Status Run(const float* x, const dnnl::memory& transformed_weights, const float* bias,
             const float* residual, float* y);

 private:
  WinogradConv(const WinogradShape& shape, const std::vector<PostOp>& post_ops, int tile,
               int64_t chunk_tiles);
  simd::WinogradGeometry Geometry() const;

  const WinogradShape shape_;
  const std::vector<simd::WinogradPostOp> post_ops_;
  const int tile_;           // outputs per tile side: 2 or 4
  const int64_t positions_;  // (tile + 2)^2 products per tile and channel pair
  const int64_t tiles_h_, tiles_w_, tiles_, chunk_tiles_;
  std::vector<float> zero_bias_;           // the bias of a convolution without one
  dnnl::matmul products_, tail_products_;  // [positions] x [tiles, C] x [C, K]: a full chunk, the last
};

}  // namespace inferd::runtime::dnnl_kernels
