// MatMul and Conv on tensors, shared by the reference kernels of the float ops (nn.cc) and of
// the quantized integer ones (quantized_linear.cc), which centre their inputs on the zero points
// and run the INT32 path.
#pragma once

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/kernels/window.h"

namespace inferd::runtime {

// numpy.matmul semantics (1-D operands, broadcast batch dims), any numeric type; out has the
// inputs' type.
Status MatMulTensors(const Tensor& a, const Tensor& b, Tensor* out);

// ONNX Conv on FP32 (summed in double) or INT32 (summed in int64, written back as INT32) tensors;
// `bias` (optional) is one value per filter of the input's type.
Status ConvolveTensors(const Tensor& x, const Tensor& weight, const Tensor* bias, const WindowAttributes& window,
                       int64_t group, Tensor* out);

}  // namespace inferd::runtime
