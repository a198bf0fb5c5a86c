#include "common/tensor.h"

#include <malloc.h>

#include <sys/mman.h>

#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace inferd {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
    {DataType::kBf16, "BF16", 2},
}};

}  // namespace

std::string_view DataTypeName(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.name;
  }
  return "INVALID";
}

DataType DataTypeFromName(std::string_view name) {
  for (const auto& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return DataType::kInvalid;
}

size_t DataTypeSize(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.size;
  }
  return 0;
}

StatusOr<int64_t> ElementCount(std::span<const int64_t> shape, int64_t limit) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return Status::InvalidArgument("negative dimension in shape " + ShapeToString(shape));
    if (dim != 0 && count > limit / dim) {
      return Status::InvalidArgument("shape " + ShapeToString(shape) + " is too large");
    }
    count *= dim;
  }
  return count;
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

StatusOr<int64_t> CountBytesElements(const uint8_t* data, size_t size) {
  int64_t count = 0;
  size_t offset = 0;
  while (offset < size) {
    if (size - offset < 4) return Status::InvalidArgument("truncated BYTES element length");
    uint32_t length;
    std::memcpy(&length, data + offset, 4);  // wire format is little-endian, as is x86/arm64
    offset += 4;
    if (length > size - offset) return Status::InvalidArgument("BYTES element longer than its buffer");
    offset += length;
    ++count;
  }
  return count;
}

namespace {
thread_local int mapped_buffer_scopes = 0;
constexpr size_t kMappedBufferMinimum = size_t{1} << 20;
}  // namespace

ScopedMappedBuffers::ScopedMappedBuffers() { ++mapped_buffer_scopes; }
ScopedMappedBuffers::~ScopedMappedBuffers() { --mapped_buffer_scopes; }

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INFERD_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define INFERD_ASAN 1
#endif

void TrimHeap() {
#ifndef INFERD_ASAN
  malloc_trim(0);
#endif
}

MutableBuffer AllocateBuffer(size_t size) {
  if (mapped_buffer_scopes > 0 && size >= kMappedBufferMinimum) {
    void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    return {std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(mapped), [size](uint8_t* data) { munmap(data, size); }),
            size};
  }
  // Cache-line aligned: make_shared_for_overwrite put the array 16 bytes into a line (after its
  // control block), so every other 32-byte vector access of a kernel split two lines. The memory
  // plan's arena comes from here: efficientnet_b0 at batch 8 went from 81 to 74 ms (median of 4
  // alternating runs); resnet50 and mobilenet_v3_large did not move.
  // Aligned by hand inside a malloc'd block one line larger, not by the aligned operator new:
  // glibc's memalign path left the plan-recording run's freed buffers resident (bert_encoder at
  // batch 32 peaked at 354 MB against 208 MB with plain malloc).
  constexpr uintptr_t kAlignment = 64;
  void* raw = std::malloc((size == 0 ? 1 : size) + kAlignment);
  if (raw == nullptr) throw std::bad_alloc();
  auto* data = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kAlignment - 1) & ~(kAlignment - 1));
  return {std::shared_ptr<uint8_t[]>(data, [raw](uint8_t*) { std::free(raw); }), size};
}

uint16_t FloatToHalf(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  int32_t half_exponent = static_cast<int32_t>(exponent) - 127 + 15;
  if (half_exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (half_exponent <= 0) {                                               // subnormal or zero
    if (half_exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - half_exponent);
    uint32_t half_mantissa = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  uint32_t half = sign | (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  uint32_t remainder = mantissa & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;  // may carry into exp
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace inferd
