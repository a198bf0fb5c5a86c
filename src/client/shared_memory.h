// The client's side of Triton's system shared-memory extension: a POSIX shared-memory object this
// process creates and maps, to fill with inputs and read outputs from, once it is registered with
// a server on the same host (Client::RegisterSystemSharedMemory).
//
//   auto region = SharedMemoryRegion::Create("/my_inputs", 1 << 20);
//   std::memcpy((*region)->data(), image, image_bytes);
//   client->RegisterSystemSharedMemory("inputs", (*region)->key(), 0, (*region)->size());
//   request.input_regions.push_back({"image", {.region = "inputs", .byte_size = image_bytes}});
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace inferd::client {

class SharedMemoryRegion {
 public:
  // Creates the object `key` ("/name"; an existing one is an error) of `byte_size` bytes, zeroed.
  static StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(const std::string& key, size_t byte_size);
  // Unmaps the object and removes its name (a server that still maps it keeps its pages until it
  // unmaps them too).
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& key() const { return key_; }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  SharedMemoryRegion(std::string key, uint8_t* data, size_t size) : key_(std::move(key)), data_(data), size_(size) {}

  const std::string key_;
  uint8_t* const data_;
  const size_t size_;
};

}  // namespace inferd::client
