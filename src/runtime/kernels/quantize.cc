// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (reference kernels), per tensor or
// per axis: y = saturate(round_half_even(x / scale) + zero_point), x = (q - zero_point) * scale.
// INT8 execution (quantized oneDNN primitives, calibration) is a later issue; these make
// quantize/dequantize pairs in a model run correctly meanwhile.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/quantize_rules.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// Which scale / zero point applies to element i: per tensor (one value) or along `axis`.
struct QuantizationLayout {
  int64_t inner = 1, channels = 1;  // element i uses entry (i / inner) % channels
};

StatusOr<QuantizationLayout> LayoutFor(const Tensor& x, const Tensor& scale, int64_t axis_attribute, std::string_view op) {
  QuantizationLayout layout;
  if (ElementsOf(scale) == 1 && scale.shape.size() <= 1) return layout;
  if (scale.shape.size() != 1) return Status::InvalidArgument(std::string(op) + ": scale must be a scalar or 1-D");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, static_cast<int64_t>(x.shape.size()), op));
  if (x.shape[axis] != scale.shape[0]) return Status::InvalidArgument(std::string(op) + ": one scale per entry of the axis");
  layout.channels = scale.shape[0];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) layout.inner *= x.shape[d];
  return layout;
}

// The zero points as integers (0 when absent), one per scale.
StatusOr<std::vector<int64_t>> ZeroPoints(const Tensor* zero_point, int64_t count) {
  std::vector<int64_t> values(static_cast<size_t>(count), 0);
  if (zero_point == nullptr) return values;
  if (ElementsOf(*zero_point) != count) return Status::InvalidArgument("zero_point must match the scale");
  RETURN_IF_ERROR(DispatchNumeric(zero_point->dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = static_cast<int64_t>(ValuesOf<T>(*zero_point)[i]);
    return Status::Ok();
  }));
  return values;
}

StatusOr<std::unique_ptr<Kernel>> MakeQuantizeLinear(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", 1));
  return MakeKernel([axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "QuantizeLinear"));
    const Tensor& x = *in[0];
    const Tensor& scale = *in[1];
    const Tensor* zero_point = InputAt(in, 2);
    if (x.dtype != DataType::kFp32 || scale.dtype != DataType::kFp32) return Status::InvalidArgument("QuantizeLinear: x and scale must be FP32");
    ASSIGN_OR_RETURN(QuantizationLayout layout, LayoutFor(x, scale, axis, "QuantizeLinear"));
    ASSIGN_OR_RETURN(std::vector<int64_t> zero, ZeroPoints(zero_point, layout.channels));
    const DataType type = zero_point != nullptr ? zero_point->dtype : DataType::kUint8;
    auto run = [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(Q * dst, AllocateOutputAs<Q>(&out[0], type, x.shape));
      const float* src = ValuesOf<float>(x);
      const float* s = ValuesOf<float>(scale);
      for (int64_t i = 0; i < ElementsOf(x); ++i) {
        const auto c = static_cast<size_t>((i / layout.inner) % layout.channels);
        dst[i] = Quantize<Q>(src[i], s[c], zero[c]);
      }
      return Status::Ok();
    };
    if (type == DataType::kUint8) return run(TypeTag<uint8_t>{});
    if (type == DataType::kInt8) return run(TypeTag<int8_t>{});
    return Status::InvalidArgument("QuantizeLinear: zero_point must be UINT8 or INT8");
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeDequantizeLinear(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", 1));
  return MakeKernel([axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "DequantizeLinear"));
    const Tensor& x = *in[0];
    const Tensor& scale = *in[1];
    if (scale.dtype != DataType::kFp32) return Status::InvalidArgument("DequantizeLinear: scale must be FP32");
    if (x.dtype != DataType::kUint8 && x.dtype != DataType::kInt8 && x.dtype != DataType::kInt32) {
      return Status::InvalidArgument("DequantizeLinear: x must be UINT8, INT8 or INT32");
    }
    ASSIGN_OR_RETURN(QuantizationLayout layout, LayoutFor(x, scale, axis, "DequantizeLinear"));
    ASSIGN_OR_RETURN(std::vector<int64_t> zero, ZeroPoints(InputAt(in, 2), layout.channels));
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    const float* s = ValuesOf<float>(scale);
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      const Q* src = ValuesOf<Q>(x);
      for (int64_t i = 0; i < ElementsOf(x); ++i) {
        const auto c = static_cast<size_t>((i / layout.inner) % layout.channels);
        dst[i] = static_cast<float>(static_cast<double>(static_cast<int64_t>(src[i]) - zero[c]) * s[c]);
      }
      return Status::Ok();
    });
  });
}

// DynamicQuantizeLinear: UINT8 with the scale and zero point that map [min(x, 0), max(x, 0)]
// onto [0, 255].
StatusOr<std::unique_ptr<Kernel>> MakeDynamicQuantizeLinear(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "DynamicQuantizeLinear"));
    const Tensor& x = *in[0];
    if (x.dtype != DataType::kFp32) return Status::InvalidArgument("DynamicQuantizeLinear: x must be FP32");
    const float* src = ValuesOf<float>(x);
    float low = 0, high = 0;
    for (int64_t i = 0; i < ElementsOf(x); ++i) {
      low = std::min(low, src[i]);
      high = std::max(high, src[i]);
    }
    const auto [scale, zero] = DynamicQuantizationOf(low, high);
    ASSIGN_OR_RETURN(uint8_t * y, AllocateOutputAs<uint8_t>(&out[0], DataType::kUint8, x.shape));
    for (int64_t i = 0; i < ElementsOf(x); ++i) y[i] = scale == 0 ? zero : Quantize<uint8_t>(src[i], scale, zero);
    if (out.size() > 1) {
      ASSIGN_OR_RETURN(float* s, AllocateOutputAs<float>(&out[1], DataType::kFp32, {}));
      *s = scale;
    }
    if (out.size() > 2) {
      ASSIGN_OR_RETURN(uint8_t * z, AllocateOutputAs<uint8_t>(&out[2], DataType::kUint8, {}));
      *z = zero;
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterQuantizeKernels(KernelRegistry* r) {
  r->Register("QuantizeLinear", 10, MakeQuantizeLinear);
  r->Register("DequantizeLinear", 10, MakeDequantizeLinear);
  r->Register("DynamicQuantizeLinear", 11, MakeDynamicQuantizeLinear);
}

}  // namespace inferd::runtime
