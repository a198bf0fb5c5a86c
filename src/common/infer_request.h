// The request and response types every frontend builds and every layer below core consumes.
// Ownership: a frontend moves an InferRequest into InferenceServer::InferAsync; from then on the
// server owns it and calls the callback exactly once, from a non-I/O thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

// A request or response parameter that has no field of its own: KServe's `parameters` entries
// (numbers, strings, bools). Routers read a request's (`param.NAME` conditions) and answer
// `routed_to` and `tier` in a response's. Few per request: a vector, searched in order.
struct InferParameter {
  std::string name;
  std::variant<int64_t, double, std::string, bool> value;
};
using InferParameters = std::vector<InferParameter>;
// The parameter called `name`, or null.
inline const InferParameter* FindParameter(const InferParameters& parameters, std::string_view name) {
  for (const InferParameter& parameter : parameters) {
    if (parameter.name == name) return &parameter;
  }
  return nullptr;
}
// Sets (or replaces) a parameter.
inline void SetParameter(InferParameters& parameters, std::string name, decltype(InferParameter::value) value) {
  for (InferParameter& parameter : parameters) {
    if (parameter.name == name) {
      parameter.value = std::move(value);
      return;
    }
  }
  parameters.push_back({std::move(name), std::move(value)});
}

// Triton's shared-memory extension: `byte_size` bytes at `offset` in the region a client
// registered as `region` (core/shared_memory.h), where an input's bytes lie or an output's go.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
// (tensor name, where its bytes are)
using SharedMemoryRefs = std::vector<std::pair<std::string, SharedMemoryRef>>;

struct InferRequest {
  std::string model_name;
  int64_t model_version = 0;  // 0: the server picks the newest ready version
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<std::string> requested_outputs;  // empty: every output of the model
  // Triton's classification extension: requested outputs to answer as their top `count` classes,
  // BYTES "value:index[:label]" (common/classification.h). (output name, count)
  std::vector<std::pair<std::string, uint32_t>> classifications;
  uint32_t priority = 0;                       // 0: the model's default priority level
  uint64_t timeout_us = 0;                     // 0: the model's default queue timeout
  // The caller's own deadline (a gRPC deadline), as time left when the request arrived. Unlike
  // `timeout_us` it binds whatever the queue policy says: once it passes, the request leaves the
  // queue unexecuted with DEADLINE_EXCEEDED, since nobody is waiting for its answer. 0: none.
  uint64_t client_timeout_us = 0;
  // Every other request parameter the client sent (not priority, timeout, binary_data_output).
  InferParameters parameters;
  // Inputs whose bytes lie in shared memory: such an input arrives with its name, datatype and
  // shape and no data, which the core maps in (InferenceServer::InferAsync). Outputs to write
  // into shared memory instead of the response (each is also in requested_outputs).
  SharedMemoryRefs input_regions;
  SharedMemoryRefs output_regions;
};

// The request's time budget from its arrival: the tighter of its client deadline and its KServe
// `timeout`; 0: none. Composite models (ensembles, routers) end their runs by it.
inline uint64_t RequestBudgetUs(const InferRequest& request) {
  const uint64_t client = request.client_timeout_us, queue = request.timeout_us;
  if (client > 0 && queue > 0) return client < queue ? client : queue;
  return client > queue ? client : queue;
}

struct InferResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  std::vector<Tensor> outputs;
  // Where the time went, as the model version that answered measured it: waiting in its queue,
  // and executing (input, infer, output). An ensemble reports its steps' by them.
  int64_t queue_ns = 0;
  int64_t compute_ns = 0;
  InferParameters parameters;  // e.g. a router's routed_to
  // Outputs already written into shared memory, with the bytes written: their tensors keep name,
  // datatype and shape, and no data; the frontends answer the region instead of the bytes.
  SharedMemoryRefs output_regions;
};

// The entry of `refs` for tensor `name`, or null.
inline const SharedMemoryRef* FindRegion(const SharedMemoryRefs& refs, std::string_view name) {
  for (const auto& [tensor, ref] : refs) {
    if (tensor == name) return &ref;
  }
  return nullptr;
}

using InferCallback = std::function<void(StatusOr<InferResponse>)>;

// A request that passed validation (core/request_validation) and may queue: its inputs in config
// order with `reshape` applied, its batch size, and the key of the requests it may share a batch
// with.
struct ValidatedRequest {
  std::unique_ptr<InferRequest> request;
  int64_t batch_size = 1;
  uint64_t shape_key = 0;
};

}  // namespace inferd
