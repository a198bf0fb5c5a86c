// How a Conv or MatMul that runs in int8 says so. The QDQ fusion (passes/qdq_fusion.cc) turns
//   QuantizeLinear(x) -> DequantizeLinear -> Conv <- DequantizeLinear(int8 weights)
// into one Conv that reads the fp32 x, the int8 weights and a bias in the int32 accumulator's units
// (bias / (x_scale * w_scale[c])), and writes these attributes; the oneDNN kernels quantise x as
// they read it (round half to even, saturate: QuantizeLinear's rule), multiply in int8 and scale
// the int32 sums back to fp32 by x_scale * w_scale[c].
#pragma once

#include <optional>
#include <vector>

#include "common/status.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

inline constexpr char kInt8InputScale[] = "_int8_x_scale";
inline constexpr char kInt8InputSigned[] = "_int8_x_signed";    // 1: x as int8, 0: as uint8
inline constexpr char kInt8WeightScales[] = "_int8_w_scales";  // one, or one per output channel
// Set by FuseInt8Requantize where every reader of the output is an int8 Conv that quantises it
// with the same scale: the Conv writes it quantised (uint8, or int8 when signed), and its readers
// take it as it is.
inline constexpr char kInt8OutputScale[] = "_int8_y_scale";
inline constexpr char kInt8OutputSigned[] = "_int8_y_signed";

struct Int8Params {
  float x_scale = 1;
  bool x_signed = false;
  std::vector<float> w_scales;
  std::optional<float> y_scale;  // set: the output is written quantised at this scale
  bool y_signed = false;
  // The scale of each int32 sum: x_scale * w_scales[c].
  std::vector<float> OutputScales() const {
    std::vector<float> scales(w_scales);
    for (float& s : scales) s *= x_scale;
    return scales;
  }
};

// nullopt for a node that runs in fp32.
inline StatusOr<std::optional<Int8Params>> ReadInt8Params(const Node& node) {
  if (!node.Has(kInt8InputScale)) return std::optional<Int8Params>();
  Int8Params params;
  ASSIGN_OR_RETURN(params.x_scale, node.Float(kInt8InputScale, 1));
  ASSIGN_OR_RETURN(int64_t x_signed, node.Int(kInt8InputSigned, 0));
  params.x_signed = x_signed != 0;
  ASSIGN_OR_RETURN(params.w_scales, node.Floats(kInt8WeightScales));
  if (node.Has(kInt8OutputScale)) {
    ASSIGN_OR_RETURN(params.y_scale, node.Float(kInt8OutputScale, 1));
    ASSIGN_OR_RETURN(int64_t y_signed, node.Int(kInt8OutputSigned, 0));
    params.y_signed = y_signed != 0;
  }
  if (!(params.x_scale > 0) || params.w_scales.empty() || (params.y_scale && !(*params.y_scale > 0))) {
    return Status::InvalidArgument(node.Describe() + ": int8 scales must be positive");
  }
  return std::optional<Int8Params>(std::move(params));
}

}  // namespace inferd::runtime
