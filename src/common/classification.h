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

// A label file: one label per line, line i naming class i (Triton's label_filename).
StatusOr<std::vector<std::string>> ReadLabelFile(const std::filesystem::path& path);

// Triton's classification answer for an output: BYTES [rows, k] (or [k] when `batched` is false)
// of "value:index" or, when `labels` names the class, "value:index:label".
Tensor ClassificationTensor(const std::string& name, const std::vector<ClassScore>& classes, int64_t rows,
                            bool batched, const std::vector<std::string>* labels);

// A BYTES tensor of the given strings (4-byte little-endian length, then the bytes, each).
Tensor BytesTensor(const std::string& name, Shape shape, const std::vector<std::string>& elements);

}  // namespace inferd
