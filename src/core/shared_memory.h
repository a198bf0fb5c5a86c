// Triton's system shared-memory extension. A client on the same host creates a POSIX shared-memory
// object (shm_open KEY), registers a byte range of it under a name, and then sends requests that
// name the region, an offset and a size for an input's bytes or an output's destination instead
// of carrying them. Inputs are read where they lie; outputs are copied into the region once, and
// the answer says where they went.
//
// The registry maps each region when it is registered and hands out the bytes with a reference
// to the mapping: a region unregistered while requests still read or write it stays mapped until
// the last of them is answered. Requests look regions up in a snapshot (no lock); registering
// and unregistering take a mutex and publish a new snapshot.
//
// Not protected against: a client that shrinks the object (ftruncate) after registering it. The
// kernel then answers an access past its new end with SIGBUS, as it would to Triton. Registration
// is therefore off unless the server is started with --allow-client-shm, Triton's flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/infer_request.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

// A registered region, as the status calls report it.
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// Bytes of a region that a request reads or writes. `data` shares ownership of the mapping.
struct SharedMemoryBytes {
  std::shared_ptr<uint8_t> data;
  size_t size = 0;
};

// An output's destination, resolved when its request arrives.
struct OutputDestination {
  std::string output;
  SharedMemoryRef ref;
  SharedMemoryBytes bytes;
};

class SharedMemoryRegistry {
 public:
  // `allowed` false: every call is refused with a message that names --allow-client-shm.
  explicit SharedMemoryRegistry(bool allowed);
  ~SharedMemoryRegistry();

  // Maps [offset, offset + byte_size) of the shared-memory object `key` (shm_open's name, as
  // "/name"). INVALID_ARGUMENT for a bad range or an object that cannot be opened, ALREADY_EXISTS
  // for a name in use.
  Status Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // One region, or every region when `name` is empty. NOT_FOUND for an unknown name.
  Status Unregister(std::string_view name);
  // One region's status, or all of them when `name` is empty. NOT_FOUND for an unknown name.
  StatusOr<std::vector<SharedMemoryRegionStatus>> Regions(std::string_view name) const;

  // The bytes a request names. NOT_FOUND for an unknown region, INVALID_ARGUMENT when they do not
  // lie inside it.
  StatusOr<SharedMemoryBytes> Resolve(const SharedMemoryRef& ref) const;

  // Points each input named in request.input_regions at its bytes (copying only an input whose
  // offset is misaligned for its datatype, as the HTTP binary extension does).
  Status AttachInputs(InferRequest& request) const;
  // The destinations of request.output_regions.
  StatusOr<std::vector<OutputDestination>> ResolveOutputs(const InferRequest& request) const;

 private:
  struct Region;
  using Table = std::map<std::string, std::shared_ptr<const Region>, std::less<>>;
  Status Refused() const;

  const bool allowed_;
  Mutex write_mu_;  // serialises Register/Unregister; readers use the snapshot
  std::atomic<std::shared_ptr<const Table>> table_;
};

// Copies each output of `response` that has a destination into it: the tensor keeps its name,
// datatype and shape and drops its bytes, and response.output_regions says where they went.
// INVALID_ARGUMENT when an output is larger than its destination or absent from the response.
Status WriteOutputsToSharedMemory(const std::vector<OutputDestination>& destinations, InferResponse& response);

}  // namespace inferd
