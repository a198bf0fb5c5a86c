// Batch sizes prepared before a model serves.
//
// A model that prepares itself per input shape (Model::PreparesPerShape: the ONNX runtime tunes
// kernels and plans memory on the first run with a new shape) made the first request at each new
// batch size pay seconds, and kept a plan per size. So, before the model is ready, the server
// prepares a small set of batch sizes (config/model_config.h PlannedBatchSizes: by default every
// size up to 8, the powers of two above, the preferred sizes and max_batch_size), largest first,
// and times one more execution of each. A batch of any other size then runs as the parts that take
// the least measured time: with {1..8, 16, 32} a batch of 17 may run as 16 + 1, one of 30 as 32
// padded with zero rows whose outputs are dropped. TF Serving's batching pads to its
// allowed_batch_sizes the same way; splitting is what lets the sizes stay few.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "config/model_config.h"

namespace inferd {

// One part of a batch: `rows` of it, run as an execution of `planned` rows (> rows: padded).
struct BatchPart {
  int64_t rows = 0;
  int64_t planned = 0;
};

// Which parts each batch size 1..max runs as, from the planned sizes and their measured times:
// the split (and at most one padded part) of least total time. Pure: tested without a model.
class BatchPartition {
 public:
  // `sizes` and `seconds` pair up; sizes are >= 1.
  BatchPartition(const std::vector<int64_t>& sizes, const std::vector<double>& seconds, int64_t max_batch);
  // The parts for a batch of `batch` rows (1..max_batch), in the order they take its rows.
  const std::vector<BatchPart>& PartsFor(int64_t batch) const { return parts_[static_cast<size_t>(batch)]; }
  int64_t max_batch() const { return static_cast<int64_t>(parts_.size()) - 1; }

 private:
  std::vector<std::vector<BatchPart>> parts_;  // by batch size; [0] unused
};

// The zero-filled execution of `batch` rows the config's inputs describe (the shapes the backend
// sees: `reshape` applied). Fails when an input's shape is not fully known or is BYTES: such a
// model cannot be prepared ahead.
StatusOr<ExecutionBatch> ZeroBatch(const ModelConfig& config, int64_t batch);

// Prepares `model` for the config's planned batch sizes and wraps it so that every batch runs
// through them. Returns `model` itself when there is nothing to prepare: it does not prepare per
// shape, does not batch, its planned sizes are "none", or its inputs are not fixed-size (logged).
StatusOr<std::unique_ptr<Model>> PrepareBatchSizes(std::unique_ptr<Model> model, const ModelConfig& config);

}  // namespace inferd
