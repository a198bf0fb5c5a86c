// How a Conv or MatMul that runs in int8 says so. The QDQ fusion (passes/qdq_fusion.cc) turns
//   QuantizeLinear(x) -> DequantizeLinear -> Conv <- DequantizeLinear(int8 weights)
// into one Conv that reads the fp32 x, the int8 weights and a bias in the int32 accumulator's units
// (bias / (x_scale * w_scale[c])), and writes these attributes; the oneDNN kernels quantise x as
// they read it (round half to even, add the zero point, saturate: QuantizeLinear's rule), multiply
// (x_q - x_zero_point) by the weights in int8 and scale the int32 sums back to fp32 by
// x_scale * w_scale[c]. Padding counts as a real 0 (x_zero_point quantised), as in the QDQ graph.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

inline constexpr char kInt8InputScale[] = "_int8_x_scale";
inline constexpr char kInt8InputSigned[] = "_int8_x_signed";    // 1: x as int8, 0: as uint8
inline constexpr char kInt8InputZeroPoint[] = "_int8_x_zero_point";  // absent: 0
inline constexpr char kInt8WeightScales[] = "_int8_w_scales";  // one, or one per output channel
// Set by FuseInt8Requantize where every reader of the output is an int8 Conv that quantises it
// with the same scale: the Conv writes it quantised (uint8, or int8 when signed), and its readers
// take it as it is.
inline constexpr char kInt8OutputScale[] = "_int8_y_scale";
inline constexpr char kInt8OutputSigned[] = "_int8_y_signed";
inline constexpr char kInt8OutputZeroPoint[] = "_int8_y_zero_point";  // absent: 0

// Set by FuseDynamicQuantizedMatMul on a MatMul with int8 weights (and kInt8WeightScales) whose
// input is quantised on every run as DynamicQuantizeLinear does it (uint8, scale and zero point
// from that run's range): ONNX Runtime's quantize_dynamic. No input scale attribute then.
inline constexpr char kInt8Dynamic[] = "_int8_dynamic";

struct Int8Params {
  float x_scale = 1;
  bool x_signed = false;
  int32_t x_zero_point = 0;  // in x's quantised type's range
  std::vector<float> w_scales;
  std::optional<float> y_scale;  // set: the output is written quantised at this scale
  bool y_signed = false;
  int32_t y_zero_point = 0;
  // The scale of each int32 sum: x_scale * w_scales[c].
  std::vector<float> OutputScales() const {
    std::vector<float> scales(w_scales);
    for (float& s : scales) s *= x_scale;
    return scales;
  }
};

// Whether `value` is an int8 (signed) or uint8 value.
inline bool FitsQuantised(int64_t value, bool is_signed) {
  return is_signed ? value >= -128 && value <= 127 : value >= 0 && value <= 255;
}

// How a node writes its output quantised (kInt8OutputScale and its companions), or nullopt.
struct Int8Output {
  float scale = 1;
  bool is_signed = false;
  int32_t zero_point = 0;
};
inline StatusOr<std::optional<Int8Output>> ReadInt8Output(const Node& node) {
  if (!node.Has(kInt8OutputScale)) return std::optional<Int8Output>();
  Int8Output output;
  ASSIGN_OR_RETURN(output.scale, node.Float(kInt8OutputScale, 1));
  ASSIGN_OR_RETURN(int64_t is_signed, node.Int(kInt8OutputSigned, 0));
  output.is_signed = is_signed != 0;
  ASSIGN_OR_RETURN(int64_t zero_point, node.Int(kInt8OutputZeroPoint, 0));
  if (!FitsQuantised(zero_point, output.is_signed)) return Status::InvalidArgument(node.Describe() + ": int8 output zero point out of range");
  if (!(output.scale > 0)) return Status::InvalidArgument(node.Describe() + ": int8 scales must be positive");
  output.zero_point = static_cast<int32_t>(zero_point);
  return std::optional(output);
}

// nullopt for a node that runs in fp32.
inline StatusOr<std::optional<Int8Params>> ReadInt8Params(const Node& node) {
  if (!node.Has(kInt8InputScale)) return std::optional<Int8Params>();
  Int8Params params;
  ASSIGN_OR_RETURN(params.x_scale, node.Float(kInt8InputScale, 1));
  ASSIGN_OR_RETURN(int64_t x_signed, node.Int(kInt8InputSigned, 0));
  params.x_signed = x_signed != 0;
  ASSIGN_OR_RETURN(int64_t x_zero_point, node.Int(kInt8InputZeroPoint, 0));
  ASSIGN_OR_RETURN(params.w_scales, node.Floats(kInt8WeightScales));
  ASSIGN_OR_RETURN(std::optional<Int8Output> output, ReadInt8Output(node));
  if (output) {
    params.y_scale = output->scale;
    params.y_signed = output->is_signed;
    params.y_zero_point = output->zero_point;
  }
  if (!FitsQuantised(x_zero_point, params.x_signed)) return Status::InvalidArgument(node.Describe() + ": int8 input zero point out of range");
  params.x_zero_point = static_cast<int32_t>(x_zero_point);
  if (!(params.x_scale > 0) || params.w_scales.empty() || (params.y_scale && !(*params.y_scale > 0))) {
    return Status::InvalidArgument(node.Describe() + ": int8 scales must be positive");
  }
  return std::optional<Int8Params>(std::move(params));
}

}  // namespace inferd::runtime
