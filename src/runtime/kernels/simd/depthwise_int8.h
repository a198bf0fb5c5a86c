// Depthwise 2-D convolution in int8 on the channels-last layout (NHWC) of int8 graphs
// (dnnl_layout.h): a quantised input (uint8 or int8 with a zero point), int8 weights with a scale
// per channel, the bias in the int32 sums' units, one activation, and an fp32 output or one
// requantised for the next int8 layer. The fused QDQ Conv's semantics (int8_attributes.h).
//
// Why we write it: without VNNI, oneDNN 2.6 ran mobilenet_v3_large's and efficientnet_b0's int8
// depthwise layers slower than our fp32 kernel ran them in fp32 (AVX2, batch 8: 1.2-1.6x the time),
// though their input is a quarter of the bytes. Depthwise layers are bound by memory, not by
// arithmetic, so this kernel computes in fp32: (x - zero point) and the weights are exact in fp32,
// and so is every sum of up to 500 of their products, so the sums are the int32 sums exactly.
// One Highway source for every SIMD target, as the other kernels in this folder.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/simd/activation.h"

namespace inferd::runtime::simd {

// kernel_h at most 16.
struct DepthwiseInt8Shape {
  int64_t batch = 0, channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 3, kernel_w = 3, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
};

// What the kernel reads and writes besides the tensors.
struct DepthwiseInt8Params {
  bool x_signed = false;  // x is int8; else uint8
  int32_t x_zero_point = 0;
  // Per channel (PackDepthwiseInt8 pads them): x_scale * w_scale[c], and the bias in the sums'
  // units (empty: none).
  std::vector<float> scales, bias;
  Activation activation;
  // Set: y is requantised at this scale and zero point, as QuantizeLinear would (int8 when
  // y_signed, else uint8); unset: y is fp32.
  bool y_quantised = false;
  float y_scale = 1;
  int32_t y_zero_point = 0;
  bool y_signed = false;
};

// What PackDepthwiseInt8 pads the channels of its weights, scales and bias to: the widest vector.
inline constexpr int64_t kDepthwiseInt8ChannelPadding = 16;
inline int64_t DepthwiseInt8PaddedChannels(int64_t channels) {
  return (channels + kDepthwiseInt8ChannelPadding - 1) / kDepthwiseInt8ChannelPadding * kDepthwiseInt8ChannelPadding;
}

// ONNX weights [channels, 1, kernel_h, kernel_w] (int8) -> [kernel_h][kernel_w][channels] fp32,
// channels padded to a multiple of kDepthwiseInt8ChannelPadding; pads `params`' scales and bias the
// same way.
std::vector<float> PackDepthwiseInt8(const int8_t* weights, const DepthwiseInt8Shape& shape,
                                     DepthwiseInt8Params* params);

// x: N x in_h x in_w x C (uint8 or int8), y: N x out_h x out_w x C (fp32, uint8 or int8).
// Dilation 1, zero padding (the real 0: x's zero point). Parallel over the intra-op threads, by
// output row.
void DepthwiseConvInt8(const DepthwiseInt8Shape& shape, const void* x, const float* packed_weights,
                       const DepthwiseInt8Params& params, void* y);

}  // namespace inferd::runtime::simd
