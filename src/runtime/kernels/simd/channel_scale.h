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

// One block: `pixels` x `block` floats times `block` factors.
void ScaleChannelBlock(const float* x, const float* factors, float* y, int64_t pixels, int64_t block);

}  // namespace inferd::runtime::simd
