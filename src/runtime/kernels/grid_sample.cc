// GridSample (opset 16, 2-D; reference kernel): each output pixel reads the input at the grid's
// (x, y) in [-1, 1], by nearest, bilinear or bicubic interpolation, with zeros, border or
// reflection padding, as PyTorch's grid_sample (which ONNX's definition follows) computes it.
#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

enum class Padding { kZeros, kBorder, kReflection };
enum class Interpolation { kNearest, kBilinear, kBicubic };

struct Sampler {
  Interpolation mode;
  Padding padding;
  bool align_corners;

  double Unnormalize(double coordinate, int64_t size) const {
    return align_corners ? (coordinate + 1) / 2 * static_cast<double>(size - 1)
                         : ((coordinate + 1) * static_cast<double>(size) - 1) / 2;
  }

  static double Reflect(double x, double twice_low, double twice_high) {
    if (twice_low == twice_high) return 0;
    const double low = twice_low / 2, span = (twice_high - twice_low) / 2;
    x = std::fabs(x - low);
    const double extra = std::fmod(x, span);
    const auto flips = static_cast<int64_t>(std::floor(x / span));
    return flips % 2 == 0 ? extra + low : span - extra + low;
  }

  // Border and reflection padding move the coordinate inside the input; zeros leaves it.
  double Pad(double x, int64_t size) const {
    const double last = static_cast<double>(size - 1);
    if (padding == Padding::kBorder) return std::clamp(x, 0.0, last);
    if (padding == Padding::kReflection) {
      x = align_corners ? Reflect(x, 0, 2 * last) : Reflect(x, -1, 2 * static_cast<double>(size) - 1);
      return std::clamp(x, 0.0, last);
    }
    return x;
  }

  // One input plane of h x w.
  double Sample(const float* plane, int64_t h, int64_t w, double gx, double gy) const {
    auto at = [&](int64_t y, int64_t x) -> double {
      return y >= 0 && y < h && x >= 0 && x < w ? plane[y * w + x] : 0.0;
    };
    double x = Unnormalize(gx, w), y = Unnormalize(gy, h);
    if (mode == Interpolation::kBicubic) return Bicubic(at, x, y, h, w);
    x = Pad(x, w);
    y = Pad(y, h);
    if (mode == Interpolation::kNearest) {
      return at(static_cast<int64_t>(std::nearbyint(y)), static_cast<int64_t>(std::nearbyint(x)));
    }
    const double x0 = std::floor(x), y0 = std::floor(y);
    const double tx = x - x0, ty = y - y0;
    const auto ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
    return at(iy, ix) * (1 - tx) * (1 - ty) + at(iy, ix + 1) * tx * (1 - ty) + at(iy + 1, ix) * (1 - tx) * ty +
           at(iy + 1, ix + 1) * tx * ty;
  }

  static std::array<double, 4> CubicCoefficients(double t) {
    constexpr double a = -0.75;
    auto near = [](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    return {far(t + 1), near(t), near(1 - t), far(2 - t)};
  }

  template <typename At>
  double Bicubic(At at, double x, double y, int64_t h, int64_t w) const {
    const double x0 = std::floor(x), y0 = std::floor(y);
    const auto wx = CubicCoefficients(x - x0), wy = CubicCoefficients(y - y0);
    double value = 0;
    for (int i = 0; i < 4; ++i) {
      double row = 0;
      for (int j = 0; j < 4; ++j) {
        // Each tap is padded on its own (border and reflection bring it inside).
        const double tx = Pad(x0 - 1 + j, w), ty = Pad(y0 - 1 + i, h);
        row += at(static_cast<int64_t>(ty), static_cast<int64_t>(tx)) * wx[static_cast<size_t>(j)];
      }
      value += row * wy[static_cast<size_t>(i)];
    }
    return value;
  }
};

StatusOr<std::unique_ptr<Kernel>> MakeGridSample(const Node& node, int) {
  ASSIGN_OR_RETURN(std::string mode, node.String("mode", "bilinear"));
  ASSIGN_OR_RETURN(std::string padding, node.String("padding_mode", "zeros"));
  ASSIGN_OR_RETURN(int64_t align_corners, node.Int("align_corners", 0));
  Sampler sampler{Interpolation::kBilinear, Padding::kZeros, align_corners != 0};
  if (mode == "nearest") {
    sampler.mode = Interpolation::kNearest;
  } else if (mode == "bicubic") {
    sampler.mode = Interpolation::kBicubic;
  } else if (mode != "bilinear") {
    return Status::InvalidArgument(node.Describe() + ": unknown mode '" + mode + "'");
  }
  if (padding == "border") {
    sampler.padding = Padding::kBorder;
  } else if (padding == "reflection") {
    sampler.padding = Padding::kReflection;
  } else if (padding != "zeros") {
    return Status::InvalidArgument(node.Describe() + ": unknown padding_mode '" + padding + "'");
  }
  return MakeKernel([sampler](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "GridSample"));
    const Tensor& x = *in[0];
    const Tensor& grid = *in[1];
    if (x.dtype != DataType::kFp32 || grid.dtype != DataType::kFp32) return Status::InvalidArgument("GridSample: FP32 only");
    if (x.shape.size() != 4 || grid.shape.size() != 4 || grid.shape[0] != x.shape[0] || grid.shape[3] != 2) {
      return Status::InvalidArgument("GridSample: X must be [N, C, H, W] and grid [N, H_out, W_out, 2]");
    }
    const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    const int64_t ho = grid.shape[1], wo = grid.shape[2];
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, {n, c, ho, wo}));
    const float* src = ValuesOf<float>(x);
    const float* g = ValuesOf<float>(grid);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t channel = 0; channel < c; ++channel) {
        const float* plane = src + (b * c + channel) * h * w;
        for (int64_t p = 0; p < ho * wo; ++p) {
          const float* xy = g + (b * ho * wo + p) * 2;
          dst[(b * c + channel) * ho * wo + p] = static_cast<float>(sampler.Sample(plane, h, w, xy[0], xy[1]));
        }
      }
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterGridSampleKernels(KernelRegistry* r) { r->Register("GridSample", 16, MakeGridSample); }

}  // namespace inferd::runtime
