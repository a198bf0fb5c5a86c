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
#include <string>
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

// One tensor's quantisation as a node's attributes give it (the input's or the output's).
struct Int8Quantisation {
  float scale = 1;
  bool is_signed = false;
  int32_t zero_point = 0;
};
inline StatusOr<Int8Quantisation> ReadQuantisation(const Node& node, const char* scale_key, const char* signed_key,
                                             const char* zero_point_key, const std::string& which) {
  Int8Quantisation q;
  ASSIGN_OR_RETURN(q.scale, node.Float(scale_key, 1));
  ASSIGN_OR_RETURN(int64_t is_signed, node.Int(signed_key, 0));
  q.is_signed = is_signed != 0;
  ASSIGN_OR_RETURN(int64_t zero_point, node.Int(zero_point_key, 0));
  if (!FitsQuantised(zero_point, q.is_signed)) return Status::InvalidArgument(node.Describe() + ": int8 " + which + " zero point out of range");
  if (!(q.scale > 0)) return Status::InvalidArgument(node.Describe() + ": int8 scales must be positive");
  q.zero_point = static_cast<int32_t>(zero_point);
  return q;
}

// How a node writes its output quantised (kInt8OutputScale and its companions), or nullopt.
inline StatusOr<std::optional<Int8Quantisation>> ReadInt8Output(const Node& node) {
  if (!node.Has(kInt8OutputScale)) return std::optional<Int8Quantisation>();
  ASSIGN_OR_RETURN(Int8Quantisation output,
                   ReadQuantisation(node, kInt8OutputScale, kInt8OutputSigned, kInt8OutputZeroPoint, "output"));
  return std::optional(output);
}

// nullopt for a node that runs in fp32.
inline StatusOr<std::optional<Int8Params>> ReadInt8Params(const Node& node) {
  if (!node.Has(kInt8InputScale)) return std::optional<Int8Params>();
  Int8Params params;
  ASSIGN_OR_RETURN(Int8Quantisation input, ReadQuantisation(node, kInt8InputScale, kInt8InputSigned, kInt8InputZeroPoint, "input"));
  params.x_scale = input.scale;
  params.x_signed = input.is_signed;
  params.x_zero_point = input.zero_point;
  ASSIGN_OR_RETURN(params.w_scales, node.Floats(kInt8WeightScales));
  ASSIGN_OR_RETURN(std::optional<Int8Quantisation> output, ReadInt8Output(node));
  if (output) {
    params.y_scale = output->scale;
    params.y_signed = output->is_signed;
    params.y_zero_point = output->zero_point;
  }
  if (params.w_scales.empty()) return Status::InvalidArgument(node.Describe() + ": int8 scales must be positive");
  return std::optional<Int8Params>(std::move(params));
}

}  // namespace inferd::runtime
