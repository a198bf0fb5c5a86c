// Element-wise math our kernels apply to whole buffers, vectorised where the CPU allows.
//
// Why not oneDNN's: its swish post-op on a convolution costs 3-4 times the convolution itself on
// AVX2 (16->96 channels at 112x112, batch 8: 2.5 ms of convolution, 5.7 ms more with the post-op),
// while a separate pass over the output with the function below takes ~2.7 ms, memory included.
#pragma once

#include <cstdint>

#include "runtime/kernels/simd/channel_scale.h"

namespace inferd::runtime {

// x * sigmoid(x) in place, parallel over the intra-op threads (simd/swish.h: one source for every
// SIMD target). Relative error <= 3e-7 against the double-precision formula; NaN stays NaN.
void SwishInPlace(float* data, int64_t count);

// Swish, then QuantizeLinear's rounding into `y` as int8 (is_signed) or uint8 at `scale` and
// `zero_point`, parallel over the intra-op threads: an int8 convolution's requantised output.
void SwishQuantize(const float* x, int64_t count, float scale, int32_t zero_point, bool is_signed, void* y);

// A factor per image and channel on a blocked layout (squeeze-excitation's x * scale, scale
// [N, C, 1, 1]): x and y are `blocks` (images x channel blocks; NHWC: images, block = C) runs of
// `pixels` x `block` floats, factors `blocks` x `block` floats (the blocked layout of [N, C, 1, 1]).
// y may be x. Parallel over the intra-op threads (simd/channel_scale.h per block).
// With `output` quantised, y holds one byte per value and may not be x.
void ScaleChannelBlocks(const float* x, const float* factors, void* y, int64_t blocks, int64_t pixels, int64_t block,
                        const simd::ChannelScaleOutput& output = {});

// QuantizeLinear's rule over a buffer into int8 (is_signed) or uint8, parallel over the intra-op
// threads: an fp32 result written quantised for the int8 convolution that reads it.
void QuantizeInto(const float* x, int64_t count, float scale, int32_t zero_point, bool is_signed, void* y);

}  // namespace inferd::runtime
