// Swish (x * sigmoid(x)) over a buffer, alone or followed by QuantizeLinear's rounding into int8 or
// uint8 (and that rounding alone): the pass that follows our convolutions in place of oneDNN's swish post-op (its eltwise
// swish cost 3-4 times the convolution itself on AVX2; kernels/vector_math.h).
//
// One source for every SIMD target, as the other kernels in this folder. The exponential is
// Cody-Waite range reduction and Cephes' degree-6 polynomial: relative error <= 3e-7 against the
// double-precision formula, NaN stays NaN. The tail of a buffer runs through the same vector code
// (on a copy), so a value's result does not depend on where it sits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace inferd::runtime::simd {

void Swish(float* x, size_t count);

// q[i] = saturate(round_half_even(swish(x[i]) * (1 / scale)) + zero_point) into int8 (is_signed)
// or uint8: the fused int8 convolution's requantised output, scaled as oneDNN requantises (by the
// reciprocal; QuantizeLinear's division may round a value on a half the other way).
void SwishQuantize(const float* x, size_t count, float scale, int32_t zero_point, bool is_signed, void* q);

// The same rounding of x itself: QuantizeLinear into int8 (is_signed) or uint8.
void QuantizeValues(const float* x, size_t count, float scale, int32_t zero_point, bool is_signed, void* q);

}  // namespace inferd::runtime::simd
