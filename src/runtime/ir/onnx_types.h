// ONNX's TensorProto.DataType numbers, kept here so that kernels (Cast's `to`, ConstantOfShape)
// need not include the protobuf classes.
#pragma once

#include <cstdint>

#include "common/tensor.h"

namespace inferd::runtime {

// kInvalid for types we do not carry (complex).
DataType DataTypeFromOnnx(int32_t onnx_type);

}  // namespace inferd::runtime
