// A factor per image and channel (squeeze-excitation's x * scale, scale [N, C, 1, 1]) over a
// blocked tensor, nChw{block}c or NHWC (block = C, one block per image): x and y are `blocks`
// runs of `pixels` x `block` floats, factors `blocks` x `block` floats. y may be x.
//
// Why we write it: oneDNN 2.6's binary primitive ran it at about half the speed on AVX2 (its
// jit:uni broadcast path). One Highway source for every SIMD target, as the other kernels here;
// the widest vector that divides the block runs it, so no vector crosses a pixel's end.
#pragma once

#include <cstdint>

namespace inferd::runtime::simd {

// What the scaled values are written as: fp32, or quantised by QuantizeLinear's rule into int8
// (is_signed) or uint8, for an int8 convolution that reads them (passes/qdq_fusion.cc).
struct ChannelScaleOutput {
  bool quantised = false;
  float scale = 1;
  int32_t zero_point = 0;
  bool is_signed = false;
};

// One block: `pixels` x `block` floats times `block` factors into y (fp32, or one byte per value
// when quantised; then y may not be x).
void ScaleChannelBlock(const float* x, const float* factors, void* y, int64_t pixels, int64_t block,
                       const ChannelScaleOutput& output = {});

}  // namespace inferd::runtime::simd
