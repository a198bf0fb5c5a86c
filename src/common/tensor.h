// Tensors move through the server by pointer: `data` aliases a buffer that `data` itself keeps
// alive (a shared_ptr built with the aliasing constructor), so a tensor can point into an HTTP
// body or into one slice of a batch output without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd {

enum class DataType : uint8_t {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,  // variable length; serialized as a 4-byte little-endian length then the bytes, per element
  kBf16,
};

using Shape = std::vector<int64_t>;

// KServe v2 names: "FP32", "BYTES", ...
std::string_view DataTypeName(DataType type);
DataType DataTypeFromName(std::string_view name);  // kInvalid when unknown
// Size of one element in bytes; 0 for BYTES (variable) and kInvalid.
size_t DataTypeSize(DataType type);

// Product of dims, rejecting negative dims and products above `limit`, so a request can never make
// us allocate an absurd size.
StatusOr<int64_t> ElementCount(std::span<const int64_t> shape, int64_t limit = INT64_MAX / 16);
std::string ShapeToString(std::span<const int64_t> shape);

// Counts the elements of a serialized BYTES tensor; error if the buffer is not a whole number of
// length-prefixed elements.
StatusOr<int64_t> CountBytesElements(const uint8_t* data, size_t size);

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::shared_ptr<const uint8_t> data;  // aliasing pointer: the owner stays alive with it
  size_t byte_size = 0;
  // An ONNX sequence value instead of a tensor (the runtime's sequence ops; never crosses the
  // server, whose tensors leave it null). Its items own their buffers.
  std::shared_ptr<const std::vector<Tensor>> sequence;
  // An ONNX optional that holds nothing (the runtime's Optional ops; never crosses the server). An
  // optional that holds a value is just that value.
  bool empty_optional = false;

  std::span<const uint8_t> bytes() const { return {data.get(), byte_size}; }
  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(data.get()), byte_size / sizeof(T)};
  }
};

// A freshly allocated, uninitialised buffer (no per-element initialisation cost), 64-byte aligned.
struct MutableBuffer {
  std::shared_ptr<uint8_t[]> memory;
  size_t size = 0;
  uint8_t* get() const { return memory.get(); }
};
MutableBuffer AllocateBuffer(size_t size);

// Hands the heap's free memory back to the system (glibc's malloc_trim). Nothing under
// AddressSanitizer, which owns the heap: glibc's trim there walked arenas ASan never set up, and
// crashed (in mtrim) while another thread ended.
void TrimHeap();

// While one is alive on a thread, AllocateBuffer there maps buffers of 1 MiB or more straight from
// the system and unmaps them when they are freed, instead of taking them from glibc's heap. For a
// session's plan-recording run (once per input shape set), which allocates every intermediate
// once: freed into the heap, its buffers raised glibc's mmap threshold and stayed resident, and
// the first run at a batch size after another was forgotten peaked ~80 MB (resnet50, batch 32)
// above the same run alone. Steady-state runs use the arena and keep the heap's fast path.
class ScopedMappedBuffers {
 public:
  ScopedMappedBuffers();
  ~ScopedMappedBuffers();
  ScopedMappedBuffers(const ScopedMappedBuffers&) = delete;
  ScopedMappedBuffers& operator=(const ScopedMappedBuffers&) = delete;
};

// Wraps `size` bytes at `ptr`, kept alive by `owner`, as tensor data.
template <typename Owner>
std::shared_ptr<const uint8_t> AliasData(const std::shared_ptr<Owner>& owner, const void* ptr) {
  return std::shared_ptr<const uint8_t>(owner, static_cast<const uint8_t*>(ptr));
}

// IEEE half precision conversions (round to nearest even).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

}  // namespace inferd
