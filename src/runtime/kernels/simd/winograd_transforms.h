// The transforms of Winograd's minimal filtering for 3x3 convolutions (kernels/dnnl/dnnl_winograd.h
// runs the products between them as one batched oneDNN matmul): a chunk of input tiles into
// V = B^T d B, and the products M back into outputs A^T M A with the bias and post-ops, on the
// blocked nChw{block}c layout (dnnl_layout.h).
//
// Why Highway: the transforms were AVX2 intrinsics, 8 channels a vector, and on an AVX-512 server
// they ran at half the vector width beside oneDNN's 16-wide matmul (issue 19). Like the other
// kernels in this folder it is one source for every SIMD target, dispatched at run time; a vector
// holds a group of channels: as many as the target's vector, at most the layout's block, and a
// divisor of the channel count.
#pragma once

#include <cstdint>
#include <span>

namespace inferd::runtime::simd {

struct WinogradGeometry {
  int64_t tile = 2;  // outputs per tile side: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3)
  int64_t in_channels = 0, out_channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;
  int64_t layout_block = 16;  // 8 or 16: nChw8c / nChw16c
};

// What the outputs get after the bias, in order: the convolution's fused post-ops that the
// transforms apply (WinogradConv::Applies admits no others).
struct WinogradPostOp {
  enum class Kind { kAdd, kRelu, kLeakyRelu, kClip };
  Kind kind = Kind::kRelu;
  float alpha = 0, beta = 0;  // LeakyRelu's slope; Clip's bounds
};

// V[p][tile][c] (p < (tile + 2)^2; `tiles` rows from tile `first_tile`, numbered image by image,
// row by row) from x: N x ceil(C / block) x in_h x in_w x block, zero outside the image.
// Parallel over the intra-op threads.
void WinogradTransformInput(const WinogradGeometry& geometry, const float* x, int64_t first_tile,
                            int64_t tiles, float* v);

// The outputs of the chunk's tiles from M[p][tile][k]: A^T M A + bias, then `post_ops` (an Add
// reads `residual`, laid out as y), clipped to the image. bias: out_channels floats.
void WinogradTransformOutput(const WinogradGeometry& geometry, const float* m, int64_t first_tile,
                             int64_t tiles, const float* bias, std::span<const WinogradPostOp> post_ops,
                             const float* residual, float* y);

}  // namespace inferd::runtime::simd
