#include "instances/planned_batches.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <limits>

#include "common/clock.h"

namespace inferd {
namespace {

// Bytes of one row (dim 0 index) of a fixed-size tensor.
size_t RowBytes(const Tensor& tensor) {
  return tensor.shape.empty() || tensor.shape[0] == 0 ? 0 : tensor.byte_size / static_cast<size_t>(tensor.shape[0]);
}

// Rows [first, first + part.rows) of every input, as an execution of part.planned rows: a view of
// the batch's own buffers, or, when padded, a copy followed by zero rows.
ExecutionBatch SliceRows(const ExecutionBatch& batch, int64_t first, const BatchPart& part) {
  ExecutionBatch slice;
  slice.batch_size = part.planned;
  slice.row_failures = batch.row_failures;
  slice.row_offset = batch.row_offset + first;
  for (const Tensor& input : batch.inputs) {
    const size_t row = RowBytes(input);
    const uint8_t* begin = input.data.get() + static_cast<size_t>(first) * row;
    Tensor rows{input.name, input.dtype, input.shape, nullptr, static_cast<size_t>(part.planned) * row};
    rows.shape[0] = part.planned;
    if (part.planned == part.rows) {
      rows.data = AliasData(input.data, begin);
    } else {
      MutableBuffer padded = AllocateBuffer(rows.byte_size);
      const size_t used = static_cast<size_t>(part.rows) * row;
      std::memcpy(padded.get(), begin, used);
      std::memset(padded.get() + used, 0, rows.byte_size - used);
      rows.data = AliasData(padded.memory, padded.get());
    }
    slice.inputs.push_back(std::move(rows));
  }
  return slice;
}

Status CheckPartOutput(const Tensor& output, const BatchPart& part) {
  if (output.dtype == DataType::kBytes || output.shape.empty() || output.shape[0] != part.planned) {
    return Status::Internal("output '" + output.name + "' of an execution of " + std::to_string(part.planned) +
                            " rows has shape " + ShapeToString(output.shape) + ": not split along dim 0");
  }
  return Status::Ok();
}

// The parts' outputs as whole-batch outputs: each part's first `rows` rows, in order. One part
// (padded) keeps its buffer and drops the padding rows; several are copied into one buffer.
Status JoinRows(const std::vector<BatchPart>& parts, std::vector<std::vector<Tensor>>& part_outputs,
                std::vector<Tensor>* outputs) {
  outputs->clear();
  for (const auto& part_output : part_outputs) {
    if (part_output.size() != part_outputs[0].size()) return Status::Internal("parts of a batch gave different outputs");
  }
  int64_t total_rows = 0;
  for (const BatchPart& part : parts) total_rows += part.rows;
  for (size_t o = 0; o < part_outputs[0].size(); ++o) {
    const Tensor& head = part_outputs[0][o];
    const size_t row = RowBytes(head);
    Tensor joined{head.name, head.dtype, head.shape, nullptr, static_cast<size_t>(total_rows) * row};
    joined.shape[0] = total_rows;
    if (parts.size() == 1) {
      RETURN_IF_ERROR(CheckPartOutput(head, parts[0]));
      joined.data = head.data;
      outputs->push_back(std::move(joined));
      continue;
    }
    MutableBuffer buffer = AllocateBuffer(joined.byte_size);
    size_t offset = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      const Tensor& piece = part_outputs[p][o];
      RETURN_IF_ERROR(CheckPartOutput(piece, parts[p]));
      if (piece.dtype != head.dtype || RowBytes(piece) != row) {
        return Status::Internal("output '" + head.name + "' differs in type or row size between parts of a batch");
      }
      const size_t bytes = static_cast<size_t>(parts[p].rows) * row;
      std::memcpy(buffer.get() + offset, piece.data.get(), bytes);
      offset += bytes;
    }
    joined.data = AliasData(buffer.memory, buffer.get());
    outputs->push_back(std::move(joined));
  }
  return Status::Ok();
}

// Runs every batch as the parts its BatchPartition gives, on a model prepared for those sizes.
class PlannedBatchModel final : public Model {
 public:
  PlannedBatchModel(std::unique_ptr<Model> model, BatchPartition partition)
      : model_(std::move(model)), partition_(std::move(partition)) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    if (batch.batch_size < 1 || batch.batch_size > partition_.max_batch()) return model_->Execute(batch, outputs);
    const std::vector<BatchPart>& parts = partition_.PartsFor(batch.batch_size);
    if (parts.size() == 1 && parts[0].planned == parts[0].rows) return model_->Execute(batch, outputs);
    part_outputs_.resize(parts.size());
    int64_t first = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      RETURN_IF_ERROR(model_->Execute(SliceRows(batch, first, parts[p]), &part_outputs_[p]));
      first += parts[p].rows;
    }
    Status status = JoinRows(parts, part_outputs_, outputs);
    for (auto& held : part_outputs_) held.clear();
    return status;
  }

  bool PreparesPerShape() const override { return model_->PreparesPerShape(); }
  int64_t PreparedShapes() const override { return model_->PreparedShapes(); }
  std::optional<MemoryFootprint> Footprint() const override { return model_->Footprint(); }

 private:
  std::unique_ptr<Model> model_;
  BatchPartition partition_;
  std::vector<std::vector<Tensor>> part_outputs_;  // reused between executions
};

}  // namespace

BatchPartition::BatchPartition(const std::vector<int64_t>& sizes, const std::vector<double>& seconds,
                               int64_t max_batch)
    : parts_(static_cast<size_t>(std::max<int64_t>(max_batch, 0)) + 1) {
  // cost[b]: the least time for b rows; choice[b]: the planned size of the part that starts it.
  std::vector<double> cost(parts_.size(), 0.0);
  std::vector<int64_t> choice(parts_.size(), 0);
  for (int64_t b = 1; b <= max_batch; ++b) {
    cost[b] = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == b) {  // a planned size runs as itself, whatever noise the timings had
        cost[b] = seconds[i];
        choice[b] = b;
        break;
      }
      const double total = sizes[i] >= b ? seconds[i] : seconds[i] + cost[b - sizes[i]];
      if (total < cost[b]) {
        cost[b] = total;
        choice[b] = sizes[i];
      }
    }
  }
  for (int64_t b = 1; b <= max_batch; ++b) {
    for (int64_t left = b; left > 0 && choice[left] > 0;) {
      const int64_t planned = choice[left];
      parts_[b].push_back({std::min(planned, left), planned});
      left -= std::min(planned, left);
    }
  }
}

StatusOr<ExecutionBatch> ZeroBatch(const ModelConfig& config, int64_t batch) {
  ExecutionBatch execution;
  execution.batch_size = batch;
  for (const auto& input : config.input()) {
    const DataType dtype = DataTypeFromConfig(input.data_type());
    if (dtype == DataType::kInvalid || dtype == DataType::kBytes) {
      return Status::InvalidArgument("input '" + input.name() + "' is not of a fixed-size type");
    }
    Shape shape{batch};
    if (input.has_reshape()) {
      shape.insert(shape.end(), input.reshape().shape().begin(), input.reshape().shape().end());
    } else {
      shape.insert(shape.end(), input.dims().begin(), input.dims().end());
    }
    for (int64_t dim : shape) {
      if (dim < 0) return Status::InvalidArgument("input '" + input.name() + "' has a variable dim");
    }
    ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape));
    MutableBuffer buffer = AllocateBuffer(static_cast<size_t>(elements) * DataTypeSize(dtype));
    std::memset(buffer.get(), 0, buffer.size);
    execution.inputs.push_back({input.name(), dtype, shape, AliasData(buffer.memory, buffer.get()), buffer.size});
  }
  return execution;
}

StatusOr<std::unique_ptr<Model>> PrepareBatchSizes(std::unique_ptr<Model> model, const ModelConfig& config) {
  if (!model->PreparesPerShape() || config.max_batch_size() <= 0) return model;
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PlannedBatchSizes(config));
  if (sizes.empty()) return model;
  for (const auto& output : config.output()) {
    if (output.data_type() == inference::TYPE_STRING) {
      spdlog::info("model '{}': batch sizes are not prepared at load (output '{}' is BYTES)", config.name(),
                   output.name());
      return model;
    }
  }
  if (auto probe = ZeroBatch(config, 1); !probe.ok()) {
    spdlog::info("model '{}': batch sizes are not prepared at load ({}); the first execution with each new shape "
                 "prepares it", config.name(), probe.status().message());
    return model;
  }
  const TimePoint start = SteadyClock::now();
  std::vector<double> seconds;
  std::string timings;
  for (int64_t size : sizes) {  // largest first: the largest settles how layers keep their weights
    ASSIGN_OR_RETURN(ExecutionBatch batch, ZeroBatch(config, size));
    std::vector<Tensor> outputs;
    Status status = model->Execute(batch, &outputs);  // prepares this size
    const TimePoint timed = SteadyClock::now();
    if (status.ok()) status = model->Execute(batch, &outputs);
    if (!status.ok()) {
      return status.WithPrefix("model '" + config.name() + "': preparing batch size " + std::to_string(size));
    }
    seconds.push_back(static_cast<double>(NanosBetween(timed, SteadyClock::now())) * 1e-9);
    timings += (timings.empty() ? "" : ", ") + fmt::format("{}: {:.1f} ms", size, seconds.back() * 1e3);
  }
  spdlog::info("model '{}': prepared batch sizes {} in {:.1f} s (one execution each: {})", config.name(),
               fmt::join(sizes, ","), static_cast<double>(NanosBetween(start, SteadyClock::now())) * 1e-9, timings);
  BatchPartition partition(sizes, seconds, config.max_batch_size());
  return std::unique_ptr<Model>(std::make_unique<PlannedBatchModel>(std::move(model), std::move(partition)));
}

}  // namespace inferd
