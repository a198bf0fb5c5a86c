// Walking the elements of a serialized BYTES tensor (each: a 4-byte little-endian length, then the
// bytes), for the codecs that write them out and the backends that read them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/tensor.h"

namespace inferd {

// Calls fn(element) for each element; a length running past the buffer is cut at its end (the
// request parsers have already checked the framing with CountBytesElements).
template <typename Fn>
void ForEachBytesElement(const Tensor& tensor, Fn&& fn) {
  size_t offset = 0;
  while (offset + 4 <= tensor.byte_size) {
    uint32_t length;
    std::memcpy(&length, tensor.data.get() + offset, 4);
    offset += 4;
    length = static_cast<uint32_t>(std::min<size_t>(length, tensor.byte_size - offset));
    fn(std::string_view(reinterpret_cast<const char*>(tensor.data.get() + offset), length));
    offset += length;
  }
}

}  // namespace inferd
