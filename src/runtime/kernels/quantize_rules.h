// ONNX's quantisation rules, shared by the reference kernels (quantize.cc) and the fused int8
// ones that must match them value for value (dnnl_matmul.cc's dynamic quantisation).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace inferd::runtime {

// saturate(round_half_even(x / scale) + zero_point): the rounding comes before the zero point
// (with halves to even the order matters), the division in FP32 as ONNX's definition has it.
template <typename Q>
Q Quantize(float x, float scale, int64_t zero_point) {
  const double value = static_cast<double>(std::nearbyint(x / scale)) + static_cast<double>(zero_point);
  return static_cast<Q>(std::clamp<double>(value, std::numeric_limits<Q>::min(), std::numeric_limits<Q>::max()));
}

// DynamicQuantizeLinear's uint8 quantisation of values in [low, high] (low <= 0 <= high): the
// scale and zero point that map [low, high] onto [0, 255]; scale 0 (all zeros) quantises to 0.
struct DynamicQuantization {
  float scale = 0;
  uint8_t zero_point = 0;
};
inline DynamicQuantization DynamicQuantizationOf(float low, float high) {
  const float scale = (high - low) / 255.0f;
  return {.scale = scale, .zero_point = scale == 0 ? uint8_t{0} : Quantize<uint8_t>(-low, scale, 0)};
}

}  // namespace inferd::runtime
