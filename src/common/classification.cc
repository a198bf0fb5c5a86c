#include "common/classification.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>

namespace inferd {

StatusOr<std::vector<double>> TensorAsDoubles(const Tensor& tensor) {
  std::vector<double> values;
  values.reserve(tensor.byte_size / std::max<size_t>(1, DataTypeSize(tensor.dtype)));
  if (!ForEachNumber(tensor, [&](double value) { values.push_back(value); })) {
    return Status::InvalidArgument("output '" + tensor.name + "' is " + std::string(DataTypeName(tensor.dtype)) +
                                   ": only numeric outputs can be classified");
  }
  return values;
}

namespace {

std::string FormatValue(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

}  // namespace

StatusOr<std::vector<ClassScore>> TopClasses(const Tensor& scores, int64_t rows, size_t count) {
  ASSIGN_OR_RETURN(std::vector<double> values, TensorAsDoubles(scores));
  if (rows <= 0 || values.size() % static_cast<size_t>(rows) != 0) {
    return Status::InvalidArgument("output '" + scores.name + "' does not split into " + std::to_string(rows) + " rows");
  }
  const size_t classes = values.size() / static_cast<size_t>(rows);
  const size_t keep = std::min(count, classes);
  std::vector<ClassScore> best;
  best.reserve(keep * static_cast<size_t>(rows));
  std::vector<int64_t> order(classes);
  for (int64_t row = 0; row < rows; ++row) {
    const double* row_values = values.data() + static_cast<size_t>(row) * classes;
    for (size_t i = 0; i < classes; ++i) order[i] = static_cast<int64_t>(i);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [row_values](int64_t a, int64_t b) {
                        return row_values[a] > row_values[b] || (row_values[a] == row_values[b] && a < b);
                      });
    for (size_t i = 0; i < keep; ++i) best.push_back({row_values[order[i]], order[i]});
  }
  return best;
}

StatusOr<std::vector<std::string>> ReadLabelFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("label file " + path.string() + " cannot be read");
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(std::move(line));
  }
  return labels;
}

Tensor BytesTensor(const std::string& name, Shape shape, const std::vector<std::string>& elements) {
  size_t size = 0;
  for (const std::string& element : elements) size += 4 + element.size();
  MutableBuffer buffer = AllocateBuffer(size);
  uint8_t* out = buffer.get();
  for (const std::string& element : elements) {
    const auto length = static_cast<uint32_t>(element.size());
    const uint8_t prefix[4] = {static_cast<uint8_t>(length), static_cast<uint8_t>(length >> 8),
                               static_cast<uint8_t>(length >> 16), static_cast<uint8_t>(length >> 24)};
    std::memcpy(out, prefix, 4);
    if (!element.empty()) std::memcpy(out + 4, element.data(), element.size());
    out += 4 + element.size();
  }
  return {name, DataType::kBytes, std::move(shape), AliasData(buffer.memory, buffer.get()), size};
}

Tensor ClassificationTensor(const std::string& name, const std::vector<ClassScore>& classes, int64_t rows,
                            bool batched, const std::vector<std::string>* labels) {
  std::vector<std::string> elements;
  elements.reserve(classes.size());
  for (const ClassScore& scored : classes) {
    std::string element = FormatValue(scored.value) + ":" + std::to_string(scored.index);
    if (labels != nullptr && static_cast<size_t>(scored.index) < labels->size()) {
      element += ":" + (*labels)[static_cast<size_t>(scored.index)];
    }
    elements.push_back(std::move(element));
  }
  const int64_t per_row = rows > 0 ? static_cast<int64_t>(classes.size()) / rows : 0;
  Shape shape = batched ? Shape{rows, per_row} : Shape{per_row};
  return BytesTensor(name, std::move(shape), elements);
}

}  // namespace inferd
