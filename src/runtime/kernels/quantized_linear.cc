// Quantized matrix products and convolutions (reference kernels), the QOperator form of INT8 ONNX
// models: MatMulInteger and ConvInteger (INT32 results), QLinearMatMul and QLinearConv (results
// requantized). Inputs are centred on their zero points into INT32 tensors, multiplied exactly on
// the INT32 path of MatMul/Conv, and requantized with ONNX's rounding (nearest, ties to even) and
// saturation.
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/linear_ops.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

bool Is8Bit(DataType dtype) { return dtype == DataType::kUint8 || dtype == DataType::kInt8; }

StatusOr<std::vector<int32_t>> ReadZeroPoint(const Tensor* zero_point, DataType expected, const char* what) {
  if (zero_point == nullptr) return std::vector<int32_t>{0};
  if (zero_point->dtype != expected) return Status::InvalidArgument(std::string(what) + " must have its tensor's type");
  if (!Is8Bit(zero_point->dtype)) return Status::Unimplemented(std::string(what) + " must be UINT8 or INT8");
  std::vector<int32_t> values;
  for (int64_t i = 0; i < ElementsOf(*zero_point); ++i) {
    values.push_back(zero_point->dtype == DataType::kUint8 ? ValuesOf<uint8_t>(*zero_point)[i] : ValuesOf<int8_t>(*zero_point)[i]);
  }
  if (values.empty()) return Status::InvalidArgument(std::string(what) + " is empty");
  return values;
}

// x - zero_point as INT32, the zero point per element of `axis` (one value: the same for all).
StatusOr<Tensor> Centred(const Tensor& x, const std::vector<int32_t>& zero_point, int64_t axis, const char* what) {
  if (!Is8Bit(x.dtype)) return Status::Unimplemented(std::string(what) + " must be UINT8 or INT8");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (axis < 0) axis += rank;
  const int64_t along = zero_point.size() == 1 || axis < 0 || axis >= rank ? 1 : x.shape[axis];
  if (zero_point.size() != 1 && static_cast<int64_t>(zero_point.size()) != along)
    return Status::InvalidArgument(std::string(what) + "'s zero point has " + std::to_string(zero_point.size()) +
                                   " values, expected 1 or " + std::to_string(along));
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
  Tensor out;
  ASSIGN_OR_RETURN(int32_t * dst, AllocateOutputAs<int32_t>(&out, DataType::kInt32, x.shape));
  const int64_t n = ElementsOf(x);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t value = x.dtype == DataType::kUint8 ? ValuesOf<uint8_t>(x)[i] : ValuesOf<int8_t>(x)[i];
    const size_t z = zero_point.size() == 1 ? 0 : static_cast<size_t>((i / inner) % along);
    dst[i] = value - zero_point[z];
  }
  return out;
}

StatusOr<std::vector<float>> ReadScale(const Tensor& scale, const char* what) {
  if (scale.dtype != DataType::kFp32) return Status::InvalidArgument(std::string(what) + " must be FP32");
  const float* values = ValuesOf<float>(scale);
  return std::vector<float>(values, values + ElementsOf(scale));
}

// y = saturate(round_half_even(acc * multiplier[c]) + zero_point), c the index along `axis`.
template <typename Q>
Status Requantize(const Tensor& acc, const std::vector<double>& multiplier, int64_t axis, int32_t zero_point,
                  DataType dtype, Tensor* out) {
  ASSIGN_OR_RETURN(Q * dst, AllocateOutputAs<Q>(out, dtype, acc.shape));
  const int64_t rank = static_cast<int64_t>(acc.shape.size());
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= acc.shape[d];
  const int64_t along = axis >= 0 && axis < rank ? acc.shape[axis] : 1;
  const int32_t* values = ValuesOf<int32_t>(acc);
  for (int64_t i = 0; i < ElementsOf(acc); ++i) {
    const size_t c = multiplier.size() == 1 ? 0 : static_cast<size_t>((i / inner) % along);
    const double scaled = std::nearbyint(static_cast<double>(values[i]) * multiplier[c]) + zero_point;
    dst[i] = static_cast<Q>(std::clamp<double>(scaled, std::numeric_limits<Q>::min(), std::numeric_limits<Q>::max()));
  }
  return Status::Ok();
}

Status RequantizeAs(DataType dtype, const Tensor& acc, const std::vector<double>& multiplier, int64_t axis,
                    int32_t zero_point, Tensor* out) {
  if (dtype == DataType::kUint8) return Requantize<uint8_t>(acc, multiplier, axis, zero_point, dtype, out);
  if (dtype == DataType::kInt8) return Requantize<int8_t>(acc, multiplier, axis, zero_point, dtype, out);
  return Status::Unimplemented("the output zero point must be UINT8 or INT8");
}

// in_scale * weight_scale[c] / out_scale, per weight scale.
std::vector<double> Multipliers(float in_scale, const std::vector<float>& weight_scale, float out_scale) {
  std::vector<double> multipliers;
  for (float w : weight_scale) multipliers.push_back(static_cast<double>(in_scale) * w / out_scale);
  return multipliers;
}

// MatMulInteger(A, B, a_zero_point?, b_zero_point?): A's zero point per row (M), B's per column (N).
StatusOr<std::unique_ptr<Kernel>> MakeMatMulInteger(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "MatMulInteger"));
    const Tensor &a = *in[0], &b = *in[1];
    ASSIGN_OR_RETURN(std::vector<int32_t> a_zero, ReadZeroPoint(InputAt(in, 2), a.dtype, "a_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> b_zero, ReadZeroPoint(InputAt(in, 3), b.dtype, "b_zero_point"));
    ASSIGN_OR_RETURN(Tensor a_centred, Centred(a, a_zero, -2, "A"));
    ASSIGN_OR_RETURN(Tensor b_centred, Centred(b, b_zero, -1, "B"));
    return MatMulTensors(a_centred, b_centred, &out[0]);
  });
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): b's scale and zero point may
// be per column.
StatusOr<std::unique_ptr<Kernel>> MakeQLinearMatMul(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 8, "QLinearMatMul"));
    const Tensor &a = *in[0], &b = *in[3];
    ASSIGN_OR_RETURN(std::vector<int32_t> a_zero, ReadZeroPoint(in[2], a.dtype, "a_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> b_zero, ReadZeroPoint(in[5], b.dtype, "b_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> y_zero, ReadZeroPoint(in[7], in[7]->dtype, "y_zero_point"));
    ASSIGN_OR_RETURN(std::vector<float> a_scale, ReadScale(*in[1], "a_scale"));
    ASSIGN_OR_RETURN(std::vector<float> b_scale, ReadScale(*in[4], "b_scale"));
    ASSIGN_OR_RETURN(std::vector<float> y_scale, ReadScale(*in[6], "y_scale"));
    if (a_scale.size() != 1 || y_scale.size() != 1 || y_zero.size() != 1)
      return Status::Unimplemented("QLinearMatMul: a and y must be quantized per tensor");
    ASSIGN_OR_RETURN(Tensor a_centred, Centred(a, a_zero, -2, "a"));
    ASSIGN_OR_RETURN(Tensor b_centred, Centred(b, b_zero, -1, "b"));
    Tensor acc;
    RETURN_IF_ERROR(MatMulTensors(a_centred, b_centred, &acc));
    return RequantizeAs(in[7]->dtype, acc, Multipliers(a_scale[0], b_scale, y_scale[0]),
                        static_cast<int64_t>(acc.shape.size()) - 1, y_zero[0], &out[0]);
  });
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?): w's zero point may be per output channel.
StatusOr<std::unique_ptr<Kernel>> MakeConvInteger(const Node& node, int) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
  if (group <= 0) return Status::InvalidArgument(node.Describe() + ": group must be positive");
  return MakeKernel([window, group](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "ConvInteger"));
    ASSIGN_OR_RETURN(std::vector<int32_t> x_zero, ReadZeroPoint(InputAt(in, 2), in[0]->dtype, "x_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> w_zero, ReadZeroPoint(InputAt(in, 3), in[1]->dtype, "w_zero_point"));
    if (x_zero.size() != 1) return Status::InvalidArgument("ConvInteger: x_zero_point must be one value");
    ASSIGN_OR_RETURN(Tensor x, Centred(*in[0], x_zero, 0, "x"));
    ASSIGN_OR_RETURN(Tensor w, Centred(*in[1], w_zero, 0, "w"));
    return ConvolveTensors(x, w, nullptr, window, group, &out[0]);
  });
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): w's scale and zero point may
// be per output channel; B is INT32 in the accumulator's scale.
StatusOr<std::unique_ptr<Kernel>> MakeQLinearConv(const Node& node, int) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
  if (group <= 0) return Status::InvalidArgument(node.Describe() + ": group must be positive");
  return MakeKernel([window, group](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 8, "QLinearConv"));
    ASSIGN_OR_RETURN(std::vector<int32_t> x_zero, ReadZeroPoint(in[2], in[0]->dtype, "x_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> w_zero, ReadZeroPoint(in[5], in[3]->dtype, "w_zero_point"));
    ASSIGN_OR_RETURN(std::vector<int32_t> y_zero, ReadZeroPoint(in[7], in[7]->dtype, "y_zero_point"));
    ASSIGN_OR_RETURN(std::vector<float> x_scale, ReadScale(*in[1], "x_scale"));
    ASSIGN_OR_RETURN(std::vector<float> w_scale, ReadScale(*in[4], "w_scale"));
    ASSIGN_OR_RETURN(std::vector<float> y_scale, ReadScale(*in[6], "y_scale"));
    if (x_zero.size() != 1 || x_scale.size() != 1 || y_scale.size() != 1 || y_zero.size() != 1)
      return Status::Unimplemented("QLinearConv: x and y must be quantized per tensor");
    ASSIGN_OR_RETURN(Tensor x, Centred(*in[0], x_zero, 0, "x"));
    ASSIGN_OR_RETURN(Tensor w, Centred(*in[3], w_zero, 0, "w"));
    const Tensor* bias = InputAt(in, 8);
    if (bias != nullptr && bias->dtype != DataType::kInt32) return Status::InvalidArgument("QLinearConv: B must be INT32");
    Tensor acc;
    RETURN_IF_ERROR(ConvolveTensors(x, w, bias, window, group, &acc));
    return RequantizeAs(in[7]->dtype, acc, Multipliers(x_scale[0], w_scale, y_scale[0]), 1, y_zero[0], &out[0]);
  });
}

}  // namespace

void RegisterQuantizedLinearKernels(KernelRegistry* r) {
  r->Register("MatMulInteger", 10, MakeMatMulInteger);
  r->Register("QLinearMatMul", 10, MakeQLinearMatMul);
  r->Register("ConvInteger", 10, MakeConvInteger);
  r->Register("QLinearConv", 10, MakeQLinearConv);
}

}  // namespace inferd::runtime
