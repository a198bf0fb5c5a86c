// QuantizeLinear of an NCHW fp32 batch into NHWC int8 or uint8: what an int8 convolution's first
// layer does to the model's input (the image's few channels, planar, to the channels-last int8
// layout oneDNN's int8 kernels read), value for value as quantize_rules.h's Quantize<Q>.
//
// Why we write it: oneDNN 2.6's scaled reorder for this transposition ran at ~15 GB/s on an
// AVX-512 EPYC (0.39 ms of mobilenet_v3_large's 0.73 ms stem at batch 8, int8; issue 19), slower
// than the convolution after it. Here a vector of pixels per channel is quantised and the
// channels' vectors are interleaved into pixels as they are stored. One source for every SIMD
// target, as the other kernels in this folder.
#pragma once

#include <cstdint>

namespace inferd::runtime::simd {

// The channel counts the interleaving store takes (1 to 4: grey, RGB, RGBA images); others are
// left to oneDNN's reorder.
bool QuantizesToChannelsLast(int64_t channels);

// x: N x C x pixels fp32; q: N x pixels x C, saturate(round_half_even(x / scale) + zero_point) in
// int8 (is_signed) or uint8. Parallel over the intra-op threads.
void QuantizeToChannelsLast(const float* x, int64_t batch, int64_t channels, int64_t pixels, float scale,
                            int32_t zero_point, bool is_signed, void* q);

}  // namespace inferd::runtime::simd
