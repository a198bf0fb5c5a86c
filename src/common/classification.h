// Top-k classes of a scores tensor, shared by Triton's classification extension (any model's
// output answered as "value:index[:label]" strings, core/inference_server) and the built-in
// `classify` backend. Classes are ranked by value in the tensor's own type, highest first; equal
// values keep the lower index first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

struct ClassScore {
  double value = 0;
  int64_t index = 0;
};

// `rows` rows of equal length (a batched output: its batch size; otherwise 1); per row, the
// min(count, classes) best, row after row. Numeric tensors only.
StatusOr<std::vector<ClassScore>> TopClasses(const Tensor& scores, int64_t rows, size_t count);

// A numeric tensor's elements as doubles; INVALID_ARGUMENT for BYTES and BOOL.
StatusOr<std::vector<double>> TensorAsDoubles(const Tensor& tensor);

// Calls fn(double) on each element of a numeric tensor, in order, without copying it; false (and
// no call) for BYTES and BOOL. For per-request paths that must not allocate.
template <typename Fn>
bool ForEachNumber(const Tensor& tensor, Fn&& fn) {
  auto each = [&]<typename T>(T*) {
    for (T value : tensor.values<T>()) fn(static_cast<double>(value));
    return true;
  };
  switch (tensor.dtype) {
    case DataType::kFp32: return each(static_cast<float*>(nullptr));
    case DataType::kFp64: return each(static_cast<double*>(nullptr));
    case DataType::kInt8: return each(static_cast<int8_t*>(nullptr));
    case DataType::kInt16: return each(static_cast<int16_t*>(nullptr));
    case DataType::kInt32: return each(static_cast<int32_t*>(nullptr));
    case DataType::kInt64: return each(static_cast<int64_t*>(nullptr));
    case DataType::kUint8: return each(static_cast<uint8_t*>(nullptr));
    case DataType::kUint16: return each(static_cast<uint16_t*>(nullptr));
    case DataType::kUint32: return each(static_cast<uint32_t*>(nullptr));
    case DataType::kUint64: return each(static_cast<uint64_t*>(nullptr));
    case DataType::kFp16:
      for (uint16_t half : tensor.values<uint16_t>()) fn(static_cast<double>(HalfToFloat(half)));
      return true;
    default:
      return false;
  }
}

// A label file: one label per line, line i naming class i (Triton's label_filename).
StatusOr<std::vector<std::string>> ReadLabelFile(const std::filesystem::path& path);

// Triton's classification answer for an output: BYTES [rows, k] (or [k] when `batched` is false)
// of "value:index" or, when `labels` names the class, "value:index:label".
Tensor ClassificationTensor(const std::string& name, const std::vector<ClassScore>& classes, int64_t rows,
                            bool batched, const std::vector<std::string>* labels);

// A BYTES tensor of the given strings (4-byte little-endian length, then the bytes, each).
Tensor BytesTensor(const std::string& name, Shape shape, const std::vector<std::string>& elements);

}  // namespace inferd
