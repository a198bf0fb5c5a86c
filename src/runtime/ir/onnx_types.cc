#include "runtime/ir/onnx_types.h"

namespace inferd::runtime {

DataType DataTypeFromOnnx(int32_t onnx_type) {
  switch (onnx_type) {  // onnx.proto TensorProto.DataType
    case 1: return DataType::kFp32;
    case 2: return DataType::kUint8;
    case 3: return DataType::kInt8;
    case 4: return DataType::kUint16;
    case 5: return DataType::kInt16;
    case 6: return DataType::kInt32;
    case 7: return DataType::kInt64;
    case 8: return DataType::kBytes;
    case 9: return DataType::kBool;
    case 10: return DataType::kFp16;
    case 11: return DataType::kFp64;
    case 12: return DataType::kUint32;
    case 13: return DataType::kUint64;
    case 16: return DataType::kBf16;
    default: return DataType::kInvalid;
  }
}

}  // namespace inferd::runtime
