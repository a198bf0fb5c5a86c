// RoiAlign (reference kernel, opset 10/16): each region of interest, cut into output_height x
// output_width bins, each bin averaged (or maxed) over a grid of bilinearly interpolated samples,
// as Mask R-CNN defines it and ONNX's reference computes it.
#include <cmath>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

struct RoiAlignAttributes {
  bool half_pixel = true;  // opset 16's default; opset 10 behaves as "output_half_pixel"
  bool max_mode = false;
  int64_t height = 1, width = 1;
  int64_t sampling_ratio = 0;  // 0: ceil(roi size / output size) samples per bin
  float spatial_scale = 1.0f;
};

// The four corner weights and offsets of a bilinear sample at (y, x) in an H x W plane; all
// weights 0 outside [-1, H] x [-1, W].
struct Sample {
  int64_t offsets[4] = {0, 0, 0, 0};
  double weights[4] = {0, 0, 0, 0};
};

Sample BilinearSample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low), hy = 1 - ly, hx = 1 - lx;
  s.offsets[0] = y_low * width + x_low;
  s.offsets[1] = y_low * width + x_high;
  s.offsets[2] = y_high * width + x_low;
  s.offsets[3] = y_high * width + x_high;
  s.weights[0] = hy * hx;
  s.weights[1] = hy * lx;
  s.weights[2] = ly * hx;
  s.weights[3] = ly * lx;
  return s;
}

StatusOr<RoiAlignAttributes> ReadRoiAlign(const Node& node, int opset) {
  RoiAlignAttributes a;
  ASSIGN_OR_RETURN(std::string transform, node.String("coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel"));
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return Status::InvalidArgument(node.Describe() + ": unknown coordinate_transformation_mode '" + transform + "'");
  a.half_pixel = transform == "half_pixel";
  ASSIGN_OR_RETURN(std::string mode, node.String("mode", "avg"));
  if (mode != "avg" && mode != "max") return Status::InvalidArgument(node.Describe() + ": unknown mode '" + mode + "'");
  a.max_mode = mode == "max";
  ASSIGN_OR_RETURN(a.height, node.Int("output_height", 1));
  ASSIGN_OR_RETURN(a.width, node.Int("output_width", 1));
  ASSIGN_OR_RETURN(a.sampling_ratio, node.Int("sampling_ratio", 0));
  ASSIGN_OR_RETURN(a.spatial_scale, node.Float("spatial_scale", 1.0f));
  if (a.height <= 0 || a.width <= 0 || a.sampling_ratio < 0)
    return Status::InvalidArgument(node.Describe() + ": output sizes must be positive and sampling_ratio >= 0");
  return a;
}

StatusOr<std::unique_ptr<Kernel>> MakeRoiAlign(const Node& node, int opset) {
  ASSIGN_OR_RETURN(RoiAlignAttributes a, ReadRoiAlign(node, opset));
  return MakeKernel([a](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "RoiAlign"));
    const Tensor &x = *in[0], &rois = *in[1];
    if (x.dtype != DataType::kFp32 || rois.dtype != DataType::kFp32) return Status::Unimplemented("RoiAlign: only FP32 is supported");
    if (x.shape.size() != 4) return Status::InvalidArgument("RoiAlign: X must be [N, C, H, W]");
    if (rois.shape.size() != 2 || rois.shape[1] != 4) return Status::InvalidArgument("RoiAlign: rois must be [num_rois, 4]");
    ASSIGN_OR_RETURN(std::vector<int64_t> batch_indices, ReadInts(*in[2], "batch_indices"));
    const int64_t num_rois = rois.shape[0], batch = x.shape[0], channels = x.shape[1], height = x.shape[2], width = x.shape[3];
    if (static_cast<int64_t>(batch_indices.size()) != num_rois)
      return Status::InvalidArgument("RoiAlign: batch_indices needs one index per roi");
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, {num_rois, channels, a.height, a.width}));
    const float* boxes = ValuesOf<float>(rois);
    const float* src = ValuesOf<float>(x);
    const double offset = a.half_pixel ? 0.5 : 0.0;
    std::vector<Sample> samples;
    for (int64_t r = 0; r < num_rois; ++r) {
      const int64_t b = batch_indices[static_cast<size_t>(r)];
      if (b < 0 || b >= batch) return Status::InvalidArgument("RoiAlign: a batch index is out of range");
      const float* box = boxes + r * 4;
      const double x1 = box[0] * a.spatial_scale - offset, y1 = box[1] * a.spatial_scale - offset;
      double roi_w = box[2] * a.spatial_scale - offset - x1, roi_h = box[3] * a.spatial_scale - offset - y1;
      if (!a.half_pixel) {  // the older behaviour keeps a roi at least one pixel wide
        roi_w = std::max(roi_w, 1.0);
        roi_h = std::max(roi_h, 1.0);
      }
      const double bin_h = roi_h / static_cast<double>(a.height), bin_w = roi_w / static_cast<double>(a.width);
      const int64_t grid_h = a.sampling_ratio > 0 ? a.sampling_ratio : static_cast<int64_t>(std::ceil(roi_h / static_cast<double>(a.height)));
      const int64_t grid_w = a.sampling_ratio > 0 ? a.sampling_ratio : static_cast<int64_t>(std::ceil(roi_w / static_cast<double>(a.width)));
      const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
      for (int64_t ph = 0; ph < a.height; ++ph) {
        for (int64_t pw = 0; pw < a.width; ++pw) {
          // The bin's samples are the same for every channel: compute them once.
          samples.clear();
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const double y = y1 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const double xs = x1 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              samples.push_back(BilinearSample(y, xs, height, width));
            }
          }
          for (int64_t c = 0; c < channels; ++c) {
            const float* plane = src + (b * channels + c) * height * width;
            double value = a.max_mode ? -INFINITY : 0.0;
            for (const Sample& s : samples) {
              if (a.max_mode) {
                // As ONNX's reference: the largest weighted corner of each sample, then the largest sample.
                double corner = s.weights[0] * plane[s.offsets[0]];
                for (int k = 1; k < 4; ++k) corner = std::max(corner, s.weights[k] * plane[s.offsets[k]]);
                value = std::max(value, corner);
              } else {
                for (int k = 0; k < 4; ++k) value += s.weights[k] * plane[s.offsets[k]];
              }
            }
            if (!a.max_mode) value /= count;
            if (samples.empty()) value = 0.0;
            dst[((r * channels + c) * a.height + ph) * a.width + pw] = static_cast<float>(value);
          }
        }
      }
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterRoiAlignKernels(KernelRegistry* r) { r->Register("RoiAlign", 10, MakeRoiAlign); }

}  // namespace inferd::runtime
