#include "common/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace inferd {
namespace {

struct Descriptor {
  const char* text;
  DataType dtype;
};
constexpr Descriptor kDescriptors[] = {
    {"<f4", DataType::kFp32}, {"<f8", DataType::kFp64},  {"<f2", DataType::kFp16},  {"<i8", DataType::kInt64},
    {"<i4", DataType::kInt32}, {"<i2", DataType::kInt16}, {"|i1", DataType::kInt8},  {"<u8", DataType::kUint64},
    {"<u4", DataType::kUint32}, {"<u2", DataType::kUint16}, {"|u1", DataType::kUint8}, {"|b1", DataType::kBool},
};

// The value of `key` in the header's Python dict literal, e.g. 'descr': '<f4'.
std::string DictValue(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  at = header.find(':', at);
  if (at == std::string::npos) return "";
  size_t begin = header.find_first_not_of(' ', at + 1);
  if (begin == std::string::npos) return "";
  if (header[begin] == '(') return header.substr(begin, header.find(')', begin) - begin + 1);
  if (header[begin] == '\'') return header.substr(begin + 1, header.find('\'', begin + 1) - begin - 1);
  return header.substr(begin, header.find_first_of(",}", begin) - begin);
}

StatusOr<Shape> ParseShape(const std::string& tuple, const std::string& where) {
  Shape shape;
  std::string inner = tuple.size() >= 2 ? tuple.substr(1, tuple.size() - 2) : "";
  std::stringstream parts(inner);
  std::string part;
  while (std::getline(parts, part, ',')) {
    size_t begin = part.find_first_not_of(' ');
    if (begin == std::string::npos) continue;
    char* end = nullptr;
    long long dim = std::strtoll(part.c_str() + begin, &end, 10);
    if (end == part.c_str() + begin || dim < 0) return Status::InvalidArgument(where + ": bad shape " + tuple);
    shape.push_back(dim);
  }
  return shape;
}

}  // namespace

StatusOr<Tensor> ReadNpy(const std::filesystem::path& path) {
  const std::string where = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + where);
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    return Status::InvalidArgument(where + " is not a .npy file");
  }
  uint32_t header_length = 0;
  if (magic[6] == 1) {
    uint16_t short_length = 0;
    in.read(reinterpret_cast<char*>(&short_length), 2);
    header_length = short_length;
  } else {
    in.read(reinterpret_cast<char*>(&header_length), 4);
  }
  if (!in || header_length > (1u << 20)) return Status::InvalidArgument(where + ": bad .npy header");
  std::string header(header_length, '\0');
  in.read(header.data(), header_length);
  const std::string descr = DictValue(header, "descr");
  DataType dtype = DataType::kInvalid;
  for (const auto& d : kDescriptors) {
    if (descr == d.text || (descr.size() == 3 && descr[0] == '|' && std::string("<") + descr.substr(1) == d.text)) {
      dtype = d.dtype;
    }
  }
  if (dtype == DataType::kInvalid) return Status::InvalidArgument(where + ": unsupported dtype '" + descr + "'");
  if (DictValue(header, "fortran_order") == "True") return Status::InvalidArgument(where + ": Fortran order is not supported");
  ASSIGN_OR_RETURN(Shape shape, ParseShape(DictValue(header, "shape"), where));
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape));
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const size_t bytes = static_cast<size_t>(elements) * DataTypeSize(dtype);
  if (static_cast<size_t>(in.tellg() - data_start) < bytes) return Status::InvalidArgument(where + ": data is truncated");
  in.seekg(data_start);
  MutableBuffer buffer = AllocateBuffer(std::max<size_t>(bytes, 1));
  in.read(reinterpret_cast<char*>(buffer.get()), static_cast<std::streamsize>(bytes));
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.byte_size = bytes;
  tensor.data = AliasData(buffer.memory, buffer.get());
  return tensor;
}

Status WriteNpy(const std::filesystem::path& path, const Tensor& tensor) {
  const char* descr = nullptr;
  for (const auto& d : kDescriptors) {
    if (d.dtype == tensor.dtype) descr = d.text;
  }
  if (descr == nullptr) return Status::InvalidArgument("cannot write " + std::string(DataTypeName(tensor.dtype)) + " to .npy");
  std::string shape = "(";
  for (int64_t d : tensor.shape) shape += std::to_string(d) + ",";
  if (tensor.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic + version + length + header + newline is padded to a multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::NotFound("cannot write " + path.string());
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(tensor.data.get()), static_cast<std::streamsize>(tensor.byte_size));
  return out ? Status::Ok() : Status::Internal("writing " + path.string() + " failed");
}

}  // namespace inferd
