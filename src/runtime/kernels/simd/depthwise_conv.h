// Depthwise 2-D convolution (group == channels, one filter per channel) on oneDNN's blocked
// nChw{block}c layout (dnnl_layout.h), with the bias and one activation fused.
//
// Why we write it: on an AVX-512 EPYC, oneDNN 2.6's depthwise kernels ran mobilenet_v3_large's
// 3x3 layers at 0.50x ONNX Runtime's speed (stride 1) and 0.37x (stride 2), batch 8 (issue 19).
// Like global_pool.h it is one Highway source for every SIMD target, dispatched at run time.
//
// The vector runs along a block's channels, so every load is contiguous whatever the stride; a
// row's interior pixels (every tap inside the image) go four at a time, for four independent
// multiply-add chains, and the edges one at a time with their taps clipped.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/simd/activation.h"

namespace inferd::runtime::simd {

struct DepthwiseShape {
  int64_t batch = 0, channels = 0;
  int64_t block = 16;  // 8 or 16: nChw8c / nChw16c, channels padded to a multiple
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 3, kernel_w = 3, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
};

// ONNX weights [channels, 1, kernel_h, kernel_w] -> [ceil(channels / block)][kernel_h][kernel_w]
// [block], the padded channels' filters zero.
std::vector<float> PackDepthwiseWeights(const float* weights, const DepthwiseShape& shape);

// x: N x ceil(C / block) x in_h x in_w x block; y: N x ceil(C / block) x out_h x out_w x block.
// bias: ceil(C / block) * block floats (padded with zeros), or null. Dilation 1. Parallel over
// the intra-op threads, by output row.
void DepthwiseConv(const DepthwiseShape& shape, const float* x, const float* packed_weights, const float* bias,
                   const Activation& activation, float* y);

}  // namespace inferd::runtime::simd
