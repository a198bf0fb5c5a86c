#include "frontends/http/json_values.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

namespace inferd {
namespace {

using rapidjson::Value;

template <typename T>
bool StoreInteger(const Value& value, uint8_t* out) {
  T result;
  if (value.IsInt64()) {
    int64_t v = value.GetInt64();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
      return false;
    }
    result = static_cast<T>(v);
  } else if (value.IsUint64()) {
    uint64_t v = value.GetUint64();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    result = static_cast<T>(v);
  } else {
    return false;
  }
  std::memcpy(out, &result, sizeof(T));
  return true;
}

}  // namespace

bool StoreJsonScalar(const Value& value, DataType dtype, uint8_t* out) {
  switch (dtype) {
    case DataType::kBool:
      if (!value.IsBool()) return false;
      *out = value.GetBool() ? 1 : 0;
      return true;
    case DataType::kUint8:
      return StoreInteger<uint8_t>(value, out);
    case DataType::kUint16:
      return StoreInteger<uint16_t>(value, out);
    case DataType::kUint32:
      return StoreInteger<uint32_t>(value, out);
    case DataType::kUint64:
      return StoreInteger<uint64_t>(value, out);
    case DataType::kInt8:
      return StoreInteger<int8_t>(value, out);
    case DataType::kInt16:
      return StoreInteger<int16_t>(value, out);
    case DataType::kInt32:
      return StoreInteger<int32_t>(value, out);
    case DataType::kInt64:
      return StoreInteger<int64_t>(value, out);
    case DataType::kFp16: {
      if (!value.IsNumber()) return false;
      uint16_t half = FloatToHalf(static_cast<float>(value.GetDouble()));
      std::memcpy(out, &half, 2);
      return true;
    }
    case DataType::kBf16: {
      if (!value.IsNumber()) return false;
      uint16_t bf16 =
          static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(value.GetDouble())) >> 16);
      std::memcpy(out, &bf16, 2);
      return true;
    }
    case DataType::kFp32: {
      if (!value.IsNumber()) return false;
      float f = static_cast<float>(value.GetDouble());
      std::memcpy(out, &f, 4);
      return true;
    }
    case DataType::kFp64: {
      if (!value.IsNumber()) return false;
      double d = value.GetDouble();
      std::memcpy(out, &d, 8);
      return true;
    }
    default:
      return false;
  }
}

namespace {

template <typename T, typename Emit>
void WriteValues(const Tensor& tensor, size_t begin, size_t end, Emit emit) {
  for (size_t i = begin; i < end; ++i) {
    T value;
    std::memcpy(&value, tensor.data.get() + i * sizeof(T), sizeof(T));
    emit(value);
  }
}

}  // namespace

void WriteJsonElements(const Tensor& tensor, size_t begin, size_t end, JsonWriter& w) {
  switch (tensor.dtype) {
    case DataType::kBool:
      WriteValues<uint8_t>(tensor, begin, end, [&](uint8_t v) { w.Bool(v != 0); });
      break;
    case DataType::kUint8:
      WriteValues<uint8_t>(tensor, begin, end, [&](uint8_t v) { w.Uint(v); });
      break;
    case DataType::kUint16:
      WriteValues<uint16_t>(tensor, begin, end, [&](uint16_t v) { w.Uint(v); });
      break;
    case DataType::kUint32:
      WriteValues<uint32_t>(tensor, begin, end, [&](uint32_t v) { w.Uint(v); });
      break;
    case DataType::kUint64:
      WriteValues<uint64_t>(tensor, begin, end, [&](uint64_t v) { w.Uint64(v); });
      break;
    case DataType::kInt8:
      WriteValues<int8_t>(tensor, begin, end, [&](int8_t v) { w.Int(v); });
      break;
    case DataType::kInt16:
      WriteValues<int16_t>(tensor, begin, end, [&](int16_t v) { w.Int(v); });
      break;
    case DataType::kInt32:
      WriteValues<int32_t>(tensor, begin, end, [&](int32_t v) { w.Int(v); });
      break;
    case DataType::kInt64:
      WriteValues<int64_t>(tensor, begin, end, [&](int64_t v) { w.Int64(v); });
      break;
    case DataType::kFp16:
      WriteValues<uint16_t>(tensor, begin, end, [&](uint16_t v) { w.Double(HalfToFloat(v)); });
      break;
    case DataType::kBf16:
      WriteValues<uint16_t>(tensor, begin, end, [&](uint16_t v) { w.Double(std::bit_cast<float>(uint32_t{v} << 16)); });
      break;
    case DataType::kFp32:
      WriteValues<float>(tensor, begin, end, [&](float v) { w.Double(v); });
      break;
    case DataType::kFp64:
      WriteValues<double>(tensor, begin, end, [&](double v) { w.Double(v); });
      break;
    case DataType::kBytes:
    case DataType::kInvalid:
      break;
  }
}

namespace {
constexpr char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    uint32_t chunk = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (left > 1) chunk |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (left > 2) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kBase64Alphabet[(chunk >> 18) & 63];
    out += kBase64Alphabet[(chunk >> 12) & 63];
    out += left > 1 ? kBase64Alphabet[(chunk >> 6) & 63] : '=';
    out += left > 2 ? kBase64Alphabet[chunk & 63] : '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  // Character -> 6-bit value, -1 for characters outside the alphabet.
  static const std::array<int8_t, 256> kValues = [] {
    std::array<int8_t, 256> values;
    values.fill(-1);
    for (int i = 0; i < 64; ++i) values[static_cast<uint8_t>(kBase64Alphabet[i])] = static_cast<int8_t>(i);
    return values;
  }();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int8_t value = kValues[static_cast<uint8_t>(c)];
    if (value < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace inferd
