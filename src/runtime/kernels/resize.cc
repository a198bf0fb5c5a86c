// Resize (opsets 10-17) and Upsample (7-9): nearest, n-linear and n-cubic interpolation with every
// coordinate_transformation_mode and nearest_mode of the ONNX spec, exclude_outside and
// tf_crop_and_resize's extrapolation. Reference kernel, following the ONNX reference
// implementation's definition: per dim, each output index reads a few input indices (the
// neighbours of its source coordinate, edge-clamped) with weights; an output element is the sum
// over the product of its dims' neighbours. Weights are computed once per dim, so the inner loop is
// a short weighted sum.
#include <cmath>

#include "runtime/kernels/resize.h"

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

using Mode = ResizeMode;

// One output index along one dim: the input indices it reads and their weights.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;  // tf_crop_and_resize beyond the input: the extrapolation value
};

std::vector<double> Coefficients(const ResizeAttributes& a, double ratio) {
  switch (a.mode) {
    case Mode::kNearest: {
      if (ratio == 1) return {0, 1};
      const std::string& m = a.nearest_mode;
      if (m == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
      if (m == "floor") return {1, 0};
      if (m == "ceil") return {0, 1};
      return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};  // round_prefer_floor
    }
    case Mode::kLinear: return {1 - ratio, ratio};
    case Mode::kCubic: {
      const double A = a.cubic_a, r = ratio, s = 1 - ratio;
      return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
              ((A + 2) * r - (A + 3)) * r * r + 1,
              ((A + 2) * s - (A + 3)) * s * s + 1,
              ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
    }
  }
  return {};
}

// The source coordinate of output index x (ONNX's coordinate_transformation_mode); nullopt when
// tf_crop_and_resize lands outside the input.
std::optional<double> SourceCoordinate(const ResizeAttributes& a, double x, int64_t in, double scale, double roi_start,
                                       double roi_end) {
  const double out = scale * static_cast<double>(in);  // a real number, as the spec has it
  const std::string& m = a.coordinates;
  if (m == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nearest" || m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "pytorch_half_pixel") return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "tf_crop_and_resize") {
    double source = out == 1 ? (roi_end - roi_start) * static_cast<double>(in - 1) / 2
                             : x * (roi_end - roi_start) * static_cast<double>(in - 1) / (out - 1);
    source += roi_start * static_cast<double>(in - 1);
    if (source < 0 || source > static_cast<double>(in - 1)) return std::nullopt;
    return source;
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

Taps TapsFor(const ResizeAttributes& a, int64_t x, int64_t in, double scale, double roi_start, double roi_end) {
  Taps taps;
  const auto source = SourceCoordinate(a, static_cast<double>(x), in, scale, roi_start, roi_end);
  if (!source) {
    taps.outside = true;
    return taps;
  }
  // The neighbours start left of the source (at it minus one when it is a whole number), so the
  // ratio is in (0, 1].
  const int64_t base = static_cast<int64_t>(std::ceil(*source)) - 1;
  const double ratio = *source - static_cast<double>(base);
  std::vector<double> coefficients = Coefficients(a, ratio);
  const int64_t first = coefficients.size() == 4 ? base - 1 : base;
  double total = 0;
  for (size_t i = 0; i < coefficients.size(); ++i) {
    const int64_t index = first + static_cast<int64_t>(i);
    if (a.exclude_outside && (index < 0 || index >= in)) coefficients[i] = 0;
    total += coefficients[i];
  }
  for (size_t i = 0; i < coefficients.size(); ++i) {
    double weight = coefficients[i];
    if (a.exclude_outside && total != 0) weight /= total;
    if (weight == 0) continue;
    taps.index.push_back(std::clamp<int64_t>(first + static_cast<int64_t>(i), 0, in - 1));  // edge padding
    taps.weight.push_back(weight);
  }
  return taps;
}

template <typename T>
void Interpolate(const Tensor& x, const std::vector<std::vector<Taps>>& taps, const Shape& out_shape, double extrapolation,
                 T* dst) {
  const size_t rank = out_shape.size();
  const std::vector<int64_t> strides = ContiguousStrides(x.shape);
  const T* src = ValuesOf<T>(x);
  int64_t total = 1;
  for (int64_t d : out_shape) total *= d;
  std::vector<int64_t> at(rank, 0);
  std::vector<size_t> pick(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) outside |= taps[d][at[d]].outside;
    double value = extrapolation;
    if (!outside) {
      // Sum over every combination of the dims' taps (an odometer over `pick`).
      value = 0;
      std::fill(pick.begin(), pick.end(), 0);
      while (true) {
        double weight = 1;
        int64_t offset = 0;
        for (size_t d = 0; d < rank; ++d) {
          const Taps& t = taps[d][at[d]];
          weight *= t.weight[pick[d]];
          offset += t.index[pick[d]] * strides[d];
        }
        value += weight * static_cast<double>(src[offset]);
        bool more = false;
        for (size_t d = rank; d-- > 0 && !more;) {
          more = ++pick[d] < taps[d][at[d]].index.size();
          if (!more) pick[d] = 0;
        }
        if (!more) break;
      }
    }
    if constexpr (std::is_integral_v<T>) value = std::nearbyint(value);
    dst[i] = static_cast<T>(value);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < out_shape[d]) break;
      at[d] = 0;
    }
  }
}

StatusOr<std::vector<float>> ReadFloats(const Tensor& t, const char* what) {
  if (t.dtype != DataType::kFp32) return Status::InvalidArgument(std::string("Resize: ") + what + " must be FP32");
  const float* v = ValuesOf<float>(t);
  return std::vector<float>(v, v + ElementsOf(t));
}

// Runs one resize of `x`.
Status RunResize(const ResizeAttributes& a, const Tensor& x, const ResizeRequest& request, Tensor* out) {
  ASSIGN_OR_RETURN(ResizeGeometry geometry, ResolveResize(x.shape, request));
  const size_t rank = x.shape.size();
  const Shape& out_shape = geometry.out_shape;
  const std::vector<float>& roi = request.roi;
  if (a.coordinates == "tf_crop_and_resize" && roi.size() != 2 * rank) {
    return Status::InvalidArgument("Resize: tf_crop_and_resize needs roi with 2 * rank entries");
  }
  std::vector<std::vector<Taps>> taps(rank);
  for (size_t d = 0; d < rank; ++d) {
    const double start = roi.size() == 2 * rank ? roi[d] : 0, end = roi.size() == 2 * rank ? roi[d + rank] : 1;
    for (int64_t o = 0; o < out_shape[d]; ++o) taps[d].push_back(TapsFor(a, o, x.shape[d], geometry.scale[d], start, end));
  }
  return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, x.dtype, out_shape));
    if (ElementsOf(*out) > 0) Interpolate<T>(x, taps, out_shape, a.extrapolation_value, dst);
    return Status::Ok();
  });
}

}  // namespace

StatusOr<ResizeGeometry> ResolveResize(const Shape& x_shape, const ResizeRequest& request) {
  const size_t rank = x_shape.size();
  ResizeGeometry g;
  g.out_shape.resize(rank);
  g.scale.resize(rank);
  if (!request.sizes.empty()) {
    if (request.sizes.size() != rank) return Status::InvalidArgument("Resize: sizes must have one entry per dim");
    for (size_t d = 0; d < rank; ++d) {
      if (request.sizes[d] < 0 || x_shape[d] == 0) return Status::InvalidArgument("Resize: bad sizes");
      g.out_shape[d] = request.sizes[d];
      g.scale[d] = static_cast<double>(request.sizes[d]) / static_cast<double>(x_shape[d]);
    }
  } else {
    if (request.scales.size() != rank) return Status::InvalidArgument("Resize: scales must have one entry per dim");
    for (size_t d = 0; d < rank; ++d) {
      if (!(request.scales[d] > 0)) return Status::InvalidArgument("Resize: scales must be positive");
      g.scale[d] = request.scales[d];
      g.out_shape[d] = static_cast<int64_t>(static_cast<double>(x_shape[d]) * request.scales[d]);
    }
  }
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(g.out_shape, kMaxKernelElements));
  (void)elements;
  return g;
}

StatusOr<ResizeRequest> ReadResizeInputs(Inputs in, int opset) {
  RETURN_IF_ERROR(RequireInputs(in, 1, "Resize"));
  ResizeRequest r;
  if (opset < 11) {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Resize"));
    ASSIGN_OR_RETURN(r.scales, ReadFloats(*in[1], "scales"));
    return r;
  }
  // X, roi, scales, sizes: scales or sizes (an empty scales tensor means sizes).
  if (const Tensor* t = InputAt(in, 1); t != nullptr && ElementsOf(*t) > 0) {
    ASSIGN_OR_RETURN(r.roi, ReadFloats(*t, "roi"));
  }
  if (const Tensor* t = InputAt(in, 2); t != nullptr && ElementsOf(*t) > 0) {
    ASSIGN_OR_RETURN(r.scales, ReadFloats(*t, "scales"));
  }
  if (const Tensor* t = InputAt(in, 3); t != nullptr && ElementsOf(*t) > 0) {
    ASSIGN_OR_RETURN(r.sizes, ReadInts(*t, "Resize sizes"));
  }
  if (r.scales.empty() == r.sizes.empty()) return Status::InvalidArgument("Resize: give exactly one of scales and sizes");
  return r;
}

StatusOr<ResizeAttributes> ReadResizeAttributes(const Node& node, int opset, bool upsample) {
  ResizeAttributes a;
  ASSIGN_OR_RETURN(std::string mode, node.String("mode", "nearest"));
  if (mode == "nearest") {
    a.mode = Mode::kNearest;
  } else if (mode == "linear" || mode == "bilinear") {
    a.mode = Mode::kLinear;
  } else if (mode == "cubic" && !upsample && opset >= 11) {
    a.mode = Mode::kCubic;
  } else {
    return Status::InvalidArgument(node.Describe() + ": unknown mode '" + mode + "'");
  }
  if (upsample || opset < 11) {
    // Upsample and Resize-10: asymmetric coordinates, nearest rounds down.
    a.coordinates = "asymmetric";
    a.nearest_mode = "floor";
    return a;
  }
  ASSIGN_OR_RETURN(a.coordinates, node.String("coordinate_transformation_mode", "half_pixel"));
  ASSIGN_OR_RETURN(a.nearest_mode, node.String("nearest_mode", "round_prefer_floor"));
  ASSIGN_OR_RETURN(a.cubic_a, node.Float("cubic_coeff_a", -0.75f));
  ASSIGN_OR_RETURN(int64_t exclude_outside, node.Int("exclude_outside", 0));
  a.exclude_outside = exclude_outside != 0;
  ASSIGN_OR_RETURN(a.extrapolation_value, node.Float("extrapolation_value", 0.0f));
  static const char* const kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                             "tf_half_pixel_for_nearest", "tf_half_pixel_for_nn",  // opset 11's name
                                             "tf_crop_and_resize"};
  if (std::find(std::begin(kCoordinates), std::end(kCoordinates), a.coordinates) == std::end(kCoordinates)) {
    return Status::InvalidArgument(node.Describe() + ": unknown coordinate_transformation_mode '" + a.coordinates + "'");
  }
  static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(std::begin(kNearest), std::end(kNearest), a.nearest_mode) == std::end(kNearest)) {
    return Status::InvalidArgument(node.Describe() + ": unknown nearest_mode '" + a.nearest_mode + "'");
  }
  return a;
}

namespace {

StatusOr<std::unique_ptr<Kernel>> MakeResize(const Node& node, int opset) {
  ASSIGN_OR_RETURN(ResizeAttributes a, ReadResizeAttributes(node, opset, false));
  return MakeKernel([a, opset](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(ResizeRequest request, ReadResizeInputs(in, opset));
    return RunResize(a, *in[0], request, &out[0]);
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeUpsample(const Node& node, int opset) {
  ASSIGN_OR_RETURN(ResizeAttributes a, ReadResizeAttributes(node, opset, true));
  ASSIGN_OR_RETURN(std::vector<float> scale_attribute, node.Floats("scales"));
  return MakeKernel([a, opset, scale_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Upsample"));
    ResizeRequest request{.scales = scale_attribute};
    if (opset >= 9) {
      RETURN_IF_ERROR(RequireInputs(in, 2, "Upsample"));
      ASSIGN_OR_RETURN(request.scales, ReadFloats(*in[1], "scales"));
    }
    return RunResize(a, *in[0], request, &out[0]);
  });
}

}  // namespace

void RegisterResizeKernels(KernelRegistry* r) {
  r->Register("Resize", 10, MakeResize);
  r->Register("Upsample", 7, MakeUpsample);
}

}  // namespace inferd::runtime
