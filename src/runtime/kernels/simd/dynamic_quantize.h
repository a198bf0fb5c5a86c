// DynamicQuantizeLinear's two passes over an FP32 tensor, vectorised: the range (with 0 in it) and
// the uint8 quantisation, value for value as quantize_rules.h's Quantize<uint8_t> (the division in
// FP32, halves to even, then the zero point, then saturation).
//
// Why we write it: the fused dynamic int8 MatMul (dnnl_matmul.cc) quantises its input on every run,
// and the scalar loop (a libm nearbyintf call per value) took as long as the int8 product itself on
// bert_encoder at batch 1. One source for every SIMD target, as the other kernels in this folder.
#pragma once

#include <cstdint>

namespace inferd::runtime::simd {

struct ValueRange {
  float low = 0, high = 0;
};

// min(0, x...) and max(0, x...).
ValueRange RangeWithZero(const float* x, int64_t count);

// q[i] = saturate(round_half_even(x[i] / scale) + zero_point) in [0, 255]; scale must not be 0.
void QuantizeToUint8(const float* x, int64_t count, float scale, uint8_t zero_point, uint8_t* q);

}  // namespace inferd::runtime::simd
