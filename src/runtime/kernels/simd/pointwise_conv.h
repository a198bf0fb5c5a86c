// 1x1 convolution, stride 1, no padding, on oneDNN's blocked nChw{block}c layout (dnnl_layout.h):
// for each pixel, out = W x in over the channels, then the bias, a residual Add and one
// activation, fused.
//
// Why we write it: on an AVX-512 EPYC, oneDNN 2.6 ran mobilenet_v3_large's 1x1 convolutions at
// 0.60x ONNX Runtime's speed at batch 8 (issue 19); they are most of that model's time. Like the
// other kernels in this folder it is one Highway source for every SIMD target, dispatched at run
// time, and offered to the Conv kernel's tuning beside oneDNN's implementations.
//
// A register tile of a few pixels x two output blocks accumulates over every input channel: one
// broadcast of an input value feeds a multiply-add per output vector, one load of a weights row
// feeds every pixel of the tile. Wider vectors (more registers) take more pixels per tile.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/simd/activation.h"

namespace inferd::runtime::simd {

struct PointwiseShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  int64_t block = 16;  // 8 or 16: nChw8c / nChw16c, channels padded to a multiple
  int64_t pixels = 0;  // height x width, the same in and out
};

// What follows the product: bias, then the residual (y's shape and layout), then the activation.
struct PointwiseEpilogue {
  const float* bias = nullptr;      // ceil(out_channels / block) * block floats (padded with zeros), or null
  const float* residual = nullptr;  // may be y itself: each value is read just before it is written
  Activation activation;
};

// ONNX weights [out_channels, in_channels, 1, 1] -> [out blocks][in channels padded][block], so
// the weights of one input channel for one output block are one contiguous row; padding is zero.
std::vector<float> PackPointwiseWeights(const float* weights, const PointwiseShape& shape);

// x: N x ceil(Cin / block) x pixels x block; y: N x ceil(Cout / block) x pixels x block. Parallel
// over the intra-op threads.
void PointwiseConv(const PointwiseShape& shape, const float* x, const float* packed_weights,
                   const PointwiseEpilogue& epilogue, float* y);

}  // namespace inferd::runtime::simd
