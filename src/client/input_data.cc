#include "client/input_data.h"

#include <rapidjson/document.h>

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/npy.h"
#include "frontends/http/json_values.h"

namespace inferd::client {
namespace {

// Appends the shape implied by the nesting of `value` (first element at each level).
void NestingShape(const rapidjson::Value& value, Shape* shape) {
  if (!value.IsArray()) return;
  shape->push_back(value.Size());
  if (!value.Empty()) NestingShape(value[0], shape);
}

Status FlattenJson(const rapidjson::Value& value, DataType dtype, std::string* bytes, size_t element_size,
                   const std::string& name) {
  if (value.IsArray()) {
    for (const auto& item : value.GetArray()) RETURN_IF_ERROR(FlattenJson(item, dtype, bytes, element_size, name));
    return Status::Ok();
  }
  if (dtype == DataType::kBytes) {
    if (!value.IsString()) return Status::InvalidArgument("input '" + name + "': BYTES data must be strings");
    const uint32_t length = value.GetStringLength();
    bytes->append(reinterpret_cast<const char*>(&length), 4);
    bytes->append(value.GetString(), length);
    return Status::Ok();
  }
  const size_t offset = bytes->size();
  bytes->resize(offset + element_size);
  if (!StoreJsonScalar(value, dtype, reinterpret_cast<uint8_t*>(bytes->data() + offset)))
    return Status::InvalidArgument("input '" + name + "': a value is not a valid " + std::string(DataTypeName(dtype)));
  return Status::Ok();
}

}  // namespace

StatusOr<Shape> ResolveShape(const TensorMetadata& input, bool batching, int64_t batch,
                             const std::map<std::string, Shape>& overrides) {
  if (auto it = overrides.find(input.name); it != overrides.end()) {
    Shape shape = it->second;
    if (batching) shape.insert(shape.begin(), batch);
    return shape;
  }
  Shape shape;
  for (size_t d = 0; d < input.shape.size(); ++d) {
    if (input.shape[d] >= 0) {
      shape.push_back(input.shape[d]);
    } else if (d == 0 && batching) {
      shape.push_back(batch);
    } else {
      return Status::InvalidArgument("input '" + input.name + "' has a variable dim; give its shape with --shape " +
                                     input.name + ":d1,d2,...");
    }
  }
  return shape;
}

StatusOr<Tensor> MakeInput(const TensorMetadata& input, const Shape& shape, Fill fill, std::mt19937* rng) {
  Tensor tensor{.name = input.name, .dtype = DataTypeFromName(input.datatype), .shape = shape};
  if (tensor.dtype == DataType::kInvalid)
    return Status::InvalidArgument("input '" + input.name + "' has unknown datatype " + input.datatype);
  ASSIGN_OR_RETURN(int64_t count, ElementCount(shape, int64_t{1} << 32));
  auto bytes = std::make_shared<std::string>();
  if (tensor.dtype == DataType::kBytes) {
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t length = fill == Fill::kZero ? 0 : 8;
      bytes->append(reinterpret_cast<const char*>(&length), 4);
      for (uint32_t c = 0; c < length; ++c) bytes->push_back(static_cast<char>('a' + (*rng)() % 26));
    }
  } else {
    const size_t size = DataTypeSize(tensor.dtype);
    bytes->assign(static_cast<size_t>(count) * size, '\0');
    if (fill == Fill::kRandom) {
      std::uniform_real_distribution<double> real(-1, 1);
      for (int64_t i = 0; i < count; ++i) {
        char* out = bytes->data() + i * size;
        switch (tensor.dtype) {
          case DataType::kFp32: { float v = static_cast<float>(real(*rng)); std::memcpy(out, &v, 4); break; }
          case DataType::kFp64: { double v = real(*rng); std::memcpy(out, &v, 8); break; }
          case DataType::kFp16:
          case DataType::kBf16: break;  // zeros: a valid value in both, no conversion needed
          case DataType::kBool: *out = static_cast<char>((*rng)() % 2); break;
          default: *out = static_cast<char>((*rng)() % 10); break;  // little-endian: the low byte
        }
      }
    }
  }
  tensor.byte_size = bytes->size();
  tensor.data = AliasData(bytes, bytes->data());
  return tensor;
}

StatusOr<Tensor> ReadInputFile(const TensorMetadata& input, const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    ASSIGN_OR_RETURN(Tensor tensor, ReadNpy(path));
    tensor.name = input.name;
    return tensor;
  }
  std::ifstream file(path);
  if (!file) return Status::NotFound("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  if (doc.HasParseError() || !doc.IsArray()) return Status::InvalidArgument(path + ": expected a JSON array");
  Tensor tensor{.name = input.name, .dtype = DataTypeFromName(input.datatype)};
  if (tensor.dtype == DataType::kInvalid)
    return Status::InvalidArgument("input '" + input.name + "' has unknown datatype " + input.datatype);
  NestingShape(doc, &tensor.shape);
  auto bytes = std::make_shared<std::string>();
  RETURN_IF_ERROR(FlattenJson(doc, tensor.dtype, bytes.get(), DataTypeSize(tensor.dtype), input.name));
  tensor.byte_size = bytes->size();
  tensor.data = AliasData(bytes, bytes->data());
  return tensor;
}

StatusOr<std::pair<std::string, Shape>> ParseShapeFlag(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return Status::InvalidArgument("--shape '" + text + "' is not NAME:d1,d2");
  Shape shape;
  std::string_view dims(text.data() + colon + 1, text.size() - colon - 1);
  while (!dims.empty()) {
    const size_t comma = std::min(dims.find(','), dims.size());
    int64_t dim = 0;
    auto [end, error] = std::from_chars(dims.data(), dims.data() + comma, dim);
    if (error != std::errc() || end != dims.data() + comma || dim < 0)
      return Status::InvalidArgument("--shape '" + text + "': dims must be non-negative integers");
    shape.push_back(dim);
    dims.remove_prefix(std::min(comma + 1, dims.size()));
  }
  return std::pair{text.substr(0, colon), shape};
}

StatusOr<std::map<std::string, Shape>> ParseShapeFlags(const std::vector<std::string>& texts) {
  std::map<std::string, Shape> shapes;
  for (const std::string& text : texts) {
    ASSIGN_OR_RETURN(auto parsed, ParseShapeFlag(text));
    shapes.insert(std::move(parsed));
  }
  return shapes;
}

bool HasBatchDim(const ModelMetadata& metadata) {
  return !metadata.inputs.empty() && !metadata.inputs[0].shape.empty() && metadata.inputs[0].shape[0] == -1;
}

}  // namespace inferd::client
