#include "runtime/kernels/window.h"

#include <algorithm>

namespace inferd::runtime {

StatusOr<WindowAttributes> ReadWindow(const Node& node) {
  WindowAttributes w;
  ASSIGN_OR_RETURN(w.kernel, node.Ints("kernel_shape"));
  ASSIGN_OR_RETURN(w.strides, node.Ints("strides"));
  ASSIGN_OR_RETURN(w.dilations, node.Ints("dilations"));
  ASSIGN_OR_RETURN(w.pads, node.Ints("pads"));
  ASSIGN_OR_RETURN(w.auto_pad, node.String("auto_pad", "NOTSET"));
  ASSIGN_OR_RETURN(int64_t ceil_mode, node.Int("ceil_mode", 0));
  w.ceil_mode = ceil_mode != 0;
  return w;
}

// Fills defaults for `spatial` dims and resolves auto_pad against the input size.
Status ResolveWindow(WindowAttributes* w, const Shape& input_spatial, std::vector<int64_t>* out_spatial) {
  const size_t dims = input_spatial.size();
  if (w->kernel.size() != dims) return Status::InvalidArgument("kernel_shape does not match the input rank");
  if (w->strides.empty()) w->strides.assign(dims, 1);
  if (w->dilations.empty()) w->dilations.assign(dims, 1);
  if (w->pads.empty()) w->pads.assign(2 * dims, 0);
  if (w->strides.size() != dims || w->dilations.size() != dims || w->pads.size() != 2 * dims) {
    return Status::InvalidArgument("strides, dilations or pads do not match the input rank");
  }
  out_spatial->assign(dims, 0);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t in = input_spatial[d], stride = w->strides[d];
    const int64_t extent = w->dilations[d] * (w->kernel[d] - 1) + 1;
    if (stride <= 0 || w->dilations[d] <= 0 || w->kernel[d] <= 0) return Status::InvalidArgument("non-positive window");
    if (w->auto_pad == "SAME_UPPER" || w->auto_pad == "SAME_LOWER") {
      const int64_t out = (in + stride - 1) / stride;
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
      const int64_t small = total / 2, large = total - small;
      w->pads[d] = w->auto_pad == "SAME_UPPER" ? small : large;
      w->pads[d + dims] = w->auto_pad == "SAME_UPPER" ? large : small;
    } else if (w->auto_pad == "VALID") {
      w->pads[d] = w->pads[d + dims] = 0;
    } else if (w->auto_pad != "NOTSET") {
      return Status::InvalidArgument("unknown auto_pad '" + w->auto_pad + "'");
    }
    const int64_t span = in + w->pads[d] + w->pads[d + dims] - extent;
    if (span < 0) return Status::InvalidArgument("window larger than the padded input");
    int64_t out = (w->ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    // In ceil mode the last window must start inside the input or its left padding.
    if (w->ceil_mode && (out - 1) * stride >= in + w->pads[d]) --out;
    (*out_spatial)[d] = out;
  }
  return Status::Ok();
}

Status ResolveTransposedWindow(WindowAttributes* w, const Shape& input_spatial, const std::vector<int64_t>& output_padding,
                               const std::vector<int64_t>& output_shape, std::vector<int64_t>* out_spatial) {
  const size_t dims = input_spatial.size();
  if (w->kernel.size() != dims) return Status::InvalidArgument("ConvTranspose: kernel_shape does not match the input rank");
  if (w->strides.empty()) w->strides.assign(dims, 1);
  if (w->dilations.empty()) w->dilations.assign(dims, 1);
  if (w->pads.empty()) w->pads.assign(2 * dims, 0);
  if (w->strides.size() != dims || w->dilations.size() != dims || w->pads.size() != 2 * dims) {
    return Status::InvalidArgument("ConvTranspose: strides, dilations or pads do not match the input rank");
  }
  const std::vector<int64_t> padding = output_padding.empty() ? std::vector<int64_t>(dims, 0) : output_padding;
  if (padding.size() != dims || (!output_shape.empty() && output_shape.size() < dims)) {
    return Status::InvalidArgument("ConvTranspose: output_padding or output_shape do not match the input rank");
  }
  out_spatial->assign(dims, 0);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t extent = w->dilations[d] * (w->kernel[d] - 1) + 1;
    const int64_t full = w->strides[d] * (input_spatial[d] - 1) + padding[d] + extent;
    if (!output_shape.empty()) {
      (*out_spatial)[d] = output_shape[output_shape.size() - dims + d];
      const int64_t total = std::max<int64_t>(0, full - (*out_spatial)[d]);
      const bool upper = w->auto_pad != "SAME_LOWER";
      w->pads[d] = upper ? total / 2 : total - total / 2;
      w->pads[d + dims] = total - w->pads[d];
    } else if (w->auto_pad == "SAME_UPPER" || w->auto_pad == "SAME_LOWER") {
      (*out_spatial)[d] = input_spatial[d] * w->strides[d];
      const int64_t total = std::max<int64_t>(0, full - (*out_spatial)[d]);
      w->pads[d] = w->auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w->pads[d + dims] = total - w->pads[d];
    } else {
      (*out_spatial)[d] = full - w->pads[d] - w->pads[d + dims];
    }
    if ((*out_spatial)[d] <= 0) return Status::InvalidArgument("ConvTranspose: empty output");
  }
  return Status::Ok();
}

}  // namespace inferd::runtime
