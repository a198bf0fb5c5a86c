// Sliding-window attributes shared by Conv, ConvTranspose and pooling (reference and oneDNN).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

struct WindowAttributes {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

StatusOr<WindowAttributes> ReadWindow(const Node& node);

// Fills defaults for the spatial dims, resolves auto_pad against the input size, and computes the
// output's spatial dims.
Status ResolveWindow(WindowAttributes* w, const Shape& input_spatial, std::vector<int64_t>* out_spatial);

// ConvTranspose's geometry: fills defaults, resolves output_shape and auto_pad into pads, and
// computes the output's spatial dims (error for an empty output).
Status ResolveTransposedWindow(WindowAttributes* w, const Shape& input_spatial, const std::vector<int64_t>& output_padding,
                               const std::vector<int64_t>& output_shape, std::vector<int64_t>* out_spatial);

}  // namespace inferd::runtime
