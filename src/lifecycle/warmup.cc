#include "lifecycle/warmup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace inferd {
namespace {

constexpr int64_t kMaxWarmupBytes = int64_t{1} << 30;

StatusOr<MutableBuffer> WarmupData(const inference::ModelWarmup::Input& input, DataType dtype,
                                   int64_t elements, const std::filesystem::path& model_dir) {
  if (input.has_input_data_file()) {
    std::ifstream in(model_dir / "warmup" / input.input_data_file(), std::ios::binary);
    if (!in) return Status::NotFound("warmup file 'warmup/" + input.input_data_file() + "' is missing");
    std::stringstream content;
    content << in.rdbuf();
    std::string bytes = content.str();
    MutableBuffer buffer = AllocateBuffer(bytes.size());
    std::memcpy(buffer.get(), bytes.data(), bytes.size());
    return buffer;
  }
  if (dtype == DataType::kBytes) {  // zero or random: empty strings (a 4-byte zero length each)
    MutableBuffer buffer = AllocateBuffer(static_cast<size_t>(elements) * 4);
    std::memset(buffer.get(), 0, buffer.size);
    return buffer;
  }
  const size_t bytes = static_cast<size_t>(elements) * DataTypeSize(dtype);
  if (static_cast<int64_t>(bytes) > kMaxWarmupBytes) return Status::InvalidArgument("warmup input too large");
  MutableBuffer buffer = AllocateBuffer(bytes);
  std::memset(buffer.get(), 0, bytes);
  if (input.has_random_data()) {
    // Small random bytes are valid values for every fixed-size type (floats stay finite).
    std::mt19937 rng(42);
    for (size_t i = 0; i < bytes; ++i) buffer.get()[i] = static_cast<uint8_t>(rng() & 0x3f);
  }
  return buffer;
}

}  // namespace

StatusOr<ExecutionBatch> BuildWarmupBatch(const ModelConfig& config, const inference::ModelWarmup& sample,
                                          const std::filesystem::path& model_dir) {
  const std::string where = "model '" + config.name() + "' warmup '" + sample.name() + "'";
  ExecutionBatch batch;
  const int64_t batch_size = std::max<int64_t>(1, sample.batch_size());
  batch.batch_size = batch_size;
  for (const auto& [name, input] : sample.inputs()) {
    const DataType dtype = DataTypeFromConfig(input.data_type());
    if (dtype == DataType::kInvalid)
      return Status::InvalidArgument(where + ": input '" + name + "' has no data_type");
    Shape shape(input.dims().begin(), input.dims().end());
    if (config.max_batch_size() > 0) shape.insert(shape.begin(), batch_size);
    auto elements = ElementCount(shape);
    if (!elements.ok()) return elements.status().WithPrefix(where);
    auto data = WarmupData(input, dtype, *elements, model_dir);
    if (!data.ok()) return data.status().WithPrefix(where);
    batch.inputs.push_back({name, dtype, shape, AliasData(data->memory, data->get()), data->size});
  }
  return batch;
}

StatusOr<std::vector<Tensor>> KeepWarmInputs(const ModelConfig& config, const std::filesystem::path& model_dir) {
  if (config.model_warmup_size() > 0) {
    inference::ModelWarmup sample = config.model_warmup(0);
    sample.set_batch_size(1);
    ASSIGN_OR_RETURN(ExecutionBatch batch, BuildWarmupBatch(config, sample, model_dir));
    return std::move(batch.inputs);
  }
  std::vector<Tensor> inputs;
  for (const auto& input : config.input()) {
    const DataType dtype = DataTypeFromConfig(input.data_type());
    Shape shape(input.dims().begin(), input.dims().end());
    if (config.max_batch_size() > 0) shape.insert(shape.begin(), 1);
    const bool variable = std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; });
    if (dtype == DataType::kInvalid || dtype == DataType::kBytes || variable) {
      return Status::InvalidArgument("model '" + config.name() + "': keep_warm_interval_seconds needs a model_warmup "
                                     "sample, since input '" + input.name() + "' cannot be made of zeros (" +
                                     (variable ? "a variable dim" : "not a fixed-size type") + ")");
    }
    ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape));
    MutableBuffer buffer = AllocateBuffer(static_cast<size_t>(elements) * DataTypeSize(dtype));
    std::memset(buffer.get(), 0, buffer.size);
    inputs.push_back({input.name(), dtype, shape, AliasData(buffer.memory, buffer.get()), buffer.size});
  }
  return inputs;
}

Status RunWarmup(const ModelConfig& config, const std::filesystem::path& model_dir, Model* model) {
  for (const auto& sample : config.model_warmup()) {
    ASSIGN_OR_RETURN(ExecutionBatch batch, BuildWarmupBatch(config, sample, model_dir));
    const uint32_t runs = std::max<uint32_t>(1, sample.count());
    for (uint32_t i = 0; i < runs; ++i) {
      std::vector<Tensor> outputs;
      Status status = model->Execute(batch, &outputs);
      if (!status.ok()) {
        return status.WithPrefix("model '" + config.name() + "' warmup '" + sample.name() + "' failed");
      }
    }
    spdlog::info("model '{}': warmup '{}' ran {} time(s)", config.name(), sample.name(), runs);
  }
  return Status::Ok();
}

}  // namespace inferd
