#include "instances/batch_io.h"

#include <cstring>
#include <numeric>

namespace inferd {
namespace {

// Byte offset of the element `count` elements after the one at `offset`, in a serialized BYTES
// tensor.
size_t SkipBytesElements(const uint8_t* data, size_t size, size_t offset, int64_t count) {
  for (int64_t i = 0; i < count && offset + 4 <= size; ++i) {
    uint32_t length;
    std::memcpy(&length, data + offset, 4);
    offset += 4 + length;
  }
  return std::min(offset, size);
}

}  // namespace

StatusOr<ExecutionBatch> AssembleInputs(std::vector<PendingRequest>& batch, bool batching) {
  ExecutionBatch execution;
  if (batch.size() == 1) {
    execution.batch_size = batching ? batch.front().batch_size : 1;
    execution.inputs = std::move(batch.front().request->inputs);  // the request's own buffers
    return execution;
  }
  const InferRequest& first = *batch.front().request;
  int64_t total_batch = 0;
  for (const auto& item : batch) total_batch += item.batch_size;
  execution.batch_size = total_batch;
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const Tensor& head = first.inputs[i];
    size_t total_bytes = 0;
    for (const auto& item : batch) {
      if (item.request->inputs.size() != first.inputs.size() || item.request->inputs[i].name != head.name) {
        return Status::Internal("requests with different inputs were batched together");
      }
      total_bytes += item.request->inputs[i].byte_size;
    }
    MutableBuffer merged = AllocateBuffer(total_bytes);
    size_t offset = 0;
    for (const auto& item : batch) {
      const Tensor& part = item.request->inputs[i];
      std::memcpy(merged.get() + offset, part.data.get(), part.byte_size);
      offset += part.byte_size;
    }
    Tensor tensor{head.name, head.dtype, head.shape, AliasData(merged.memory, merged.get()), total_bytes};
    tensor.shape[0] = total_batch;
    execution.inputs.push_back(std::move(tensor));
  }
  return execution;
}

StatusOr<std::vector<std::vector<Tensor>>> SplitOutputs(std::vector<Tensor> outputs,
                                                        const std::vector<int64_t>& batch_sizes,
                                                        bool batching) {
  std::vector<std::vector<Tensor>> per_request(batch_sizes.size());
  if (batch_sizes.size() == 1) {
    per_request[0] = std::move(outputs);
    return per_request;
  }
  const int64_t total = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  for (const Tensor& output : outputs) {
    if (!batching || output.shape.empty() || output.shape[0] != total) {
      return Status::Internal("output '" + output.name + "' has shape " + ShapeToString(output.shape) +
                              ", expected dim 0 == batch size " + std::to_string(total));
    }
    ASSIGN_OR_RETURN(int64_t elements, ElementCount(output.shape));
    const int64_t per_item = total == 0 ? 0 : elements / total;
    const size_t item_bytes = DataTypeSize(output.dtype) * static_cast<size_t>(per_item);
    size_t begin = 0;  // each request's slice starts where the previous one ended
    for (size_t r = 0; r < batch_sizes.size(); ++r) {
      const size_t end =
          output.dtype == DataType::kBytes
              ? SkipBytesElements(output.data.get(), output.byte_size, begin, batch_sizes[r] * per_item)
              : begin + static_cast<size_t>(batch_sizes[r]) * item_bytes;
      Tensor slice{output.name, output.dtype, output.shape, AliasData(output.data, output.data.get() + begin),
                   end - begin};
      slice.shape[0] = batch_sizes[r];
      per_request[r].push_back(std::move(slice));
      begin = end;
    }
  }
  return per_request;
}

}  // namespace inferd
