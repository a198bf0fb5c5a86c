// Moving tensors between requests and executions: inputs of the requests of a batch are copied
// once into one contiguous tensor per input (no copy at all for a batch of one request); outputs
// are handed back as slices of the batch output, sharing its memory.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "scheduler/scheduler.h"

namespace inferd {

// A batch of one request hands its input tensors over (moved, not copied).
StatusOr<ExecutionBatch> AssembleInputs(std::vector<PendingRequest>& batch, bool batching);

// result[i] holds request i's outputs. `batch_sizes[i]` is request i's dim 0.
StatusOr<std::vector<std::vector<Tensor>>> SplitOutputs(std::vector<Tensor> outputs,
                                                        const std::vector<int64_t>& batch_sizes,
                                                        bool batching);

}  // namespace inferd
