// Resize and Upsample: the attributes and the output geometry, shared by the reference kernel
// (kernels/resize.cc) and the oneDNN one (kernels/dnnl/dnnl_resize.cc).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizeAttributes {
  ResizeMode mode = ResizeMode::kNearest;
  std::string coordinates = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation_value = 0;
};

// `upsample`: the Upsample op (opsets 7-9), whose only attributes are the mode and the scales.
StatusOr<ResizeAttributes> ReadResizeAttributes(const Node& node, int opset, bool upsample);

// What one run resizes to: the per-dim scales the coordinate transform uses and the output shape.
struct ResizeRequest {
  std::vector<float> scales, roi;
  std::vector<int64_t> sizes;
};
// Resize's inputs: X, then scales (opset 10) or roi, scales, sizes (11+; exactly one of scales and
// sizes).
StatusOr<ResizeRequest> ReadResizeInputs(std::span<const Tensor* const> inputs, int opset);

struct ResizeGeometry {
  Shape out_shape;
  std::vector<double> scale;
};
StatusOr<ResizeGeometry> ResolveResize(const Shape& x_shape, const ResizeRequest& request);

}  // namespace inferd::runtime
