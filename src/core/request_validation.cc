#include "core/request_validation.h"

#include <algorithm>
#include <functional>

namespace inferd {
namespace {

std::string ModelLabel(const ModelConfig& config) { return "model '" + config.name() + "'"; }

uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

bool DimsMatch(const inference::ModelInput& spec, const Tensor& tensor, size_t offset) {
  if (tensor.shape.size() != spec.dims().size() + offset) return false;
  for (int i = 0; i < spec.dims().size(); ++i) {
    const int64_t want = spec.dims(i);
    const int64_t got = tensor.shape[offset + i];
    if (got < 0 || (want != -1 && want != got)) return false;
  }
  return true;
}

Status CheckDims(const ModelConfig& config, const inference::ModelInput& spec, const Tensor& tensor,
                 bool batching) {
  const size_t offset = batching ? 1 : 0;
  if (DimsMatch(spec, tensor, offset)) return Status::Ok();
  // The message is built only on failure: this runs for every input of every request.
  std::vector<int64_t> expected(spec.dims().begin(), spec.dims().end());
  if (batching) expected.insert(expected.begin(), -1);
  return Status::InvalidArgument(ModelLabel(config) + ": input '" + tensor.name + "' has shape " +
                                 ShapeToString(tensor.shape) + ", expected " + ShapeToString(expected));
}

Status CheckDataSize(const ModelConfig& config, const Tensor& tensor) {
  auto elements = ElementCount(tensor.shape);
  if (!elements.ok())
    return elements.status().WithPrefix(ModelLabel(config) + ": input '" + tensor.name + "'");
  if (tensor.dtype == DataType::kBytes) {
    auto count = CountBytesElements(tensor.data.get(), tensor.byte_size);
    if (!count.ok()) return count.status().WithPrefix(ModelLabel(config) + ": input '" + tensor.name + "'");
    if (*count != *elements) {
      return Status::InvalidArgument(ModelLabel(config) + ": input '" + tensor.name + "' has " +
                                     std::to_string(*count) + " BYTES elements but shape " +
                                     ShapeToString(tensor.shape) + " needs " + std::to_string(*elements));
    }
    return Status::Ok();
  }
  const uint64_t expected = static_cast<uint64_t>(*elements) * DataTypeSize(tensor.dtype);
  if (expected != tensor.byte_size) {
    return Status::InvalidArgument(
        ModelLabel(config) + ": input '" + tensor.name + "' has " + std::to_string(tensor.byte_size) +
        " bytes of data but shape " + ShapeToString(tensor.shape) + " of " +
        std::string(DataTypeName(tensor.dtype)) + " needs " + std::to_string(expected));
  }
  return Status::Ok();
}

// The backend sees `reshape` dims instead of `dims` (the batch dim stays in front).
void ApplyReshape(const inference::ModelInput& spec, bool batching, Tensor* tensor) {
  if (!spec.has_reshape()) return;
  Shape shape;
  if (batching) shape.push_back(tensor->shape[0]);
  int64_t known = 1;
  int unknown_index = -1;
  for (int64_t dim : spec.reshape().shape()) {
    if (dim == -1)
      unknown_index = static_cast<int>(shape.size());
    else
      known *= dim;
    shape.push_back(dim);
  }
  if (unknown_index >= 0) {
    int64_t total = 1;
    for (size_t i = batching ? 1 : 0; i < tensor->shape.size(); ++i) total *= tensor->shape[i];
    shape[unknown_index] = known == 0 ? 0 : total / known;
  }
  tensor->shape = std::move(shape);
}

}  // namespace

StatusOr<ValidatedRequest> ValidateRequest(const ModelConfig& config, std::unique_ptr<InferRequest> request) {
  const bool batching = config.max_batch_size() > 0;
  for (size_t i = 0; i < request->inputs.size(); ++i) {
    const std::string& name = request->inputs[i].name;
    auto spec = std::find_if(config.input().begin(), config.input().end(),
                             [&](const auto& input) { return input.name() == name; });
    if (spec == config.input().end()) {
      return Status::InvalidArgument(ModelLabel(config) + " has no input named '" + name + "'");
    }
    for (size_t j = 0; j < i; ++j) {
      if (request->inputs[j].name == name) {
        return Status::InvalidArgument(ModelLabel(config) + ": input '" + name + "' given twice");
      }
    }
  }
  std::vector<Tensor> ordered;
  ordered.reserve(config.input_size());
  int64_t batch_size = 1;
  uint64_t shape_key = 0;
  for (const auto& spec : config.input()) {
    auto given = std::find_if(request->inputs.begin(), request->inputs.end(),
                              [&](const Tensor& t) { return t.name == spec.name(); });
    if (given == request->inputs.end()) {
      if (spec.optional()) continue;
      return Status::InvalidArgument(ModelLabel(config) + ": required input '" + spec.name() +
                                     "' is missing");
    }
    Tensor& tensor = *given;
    const DataType want = DataTypeFromConfig(spec.data_type());
    if (tensor.dtype != want) {
      return Status::InvalidArgument(ModelLabel(config) + ": input '" + tensor.name + "' has datatype " +
                                     std::string(DataTypeName(tensor.dtype)) + ", expected " +
                                     std::string(DataTypeName(want)));
    }
    RETURN_IF_ERROR(CheckDims(config, spec, tensor, batching));
    RETURN_IF_ERROR(CheckDataSize(config, tensor));
    if (batching) {
      const int64_t this_batch = tensor.shape[0];
      if (this_batch < 1 || this_batch > config.max_batch_size()) {
        return Status::InvalidArgument(
            ModelLabel(config) + ": batch size " + std::to_string(this_batch) + " of input '" + tensor.name +
            "' is not in [1, max_batch_size=" + std::to_string(config.max_batch_size()) + "]");
      }
      if (ordered.empty())
        batch_size = this_batch;
      else if (this_batch != batch_size) {
        return Status::InvalidArgument(ModelLabel(config) + ": inputs disagree on the batch size (" +
                                       std::to_string(batch_size) + " vs " + std::to_string(this_batch) +
                                       ")");
      }
    }
    ApplyReshape(spec, batching, &tensor);
    shape_key = HashCombine(shape_key, std::hash<std::string>{}(tensor.name));
    for (size_t d = batching ? 1 : 0; d < tensor.shape.size(); ++d) {
      shape_key = HashCombine(shape_key, static_cast<uint64_t>(tensor.shape[d]));
    }
    ordered.push_back(std::move(tensor));
  }
  for (const auto& name : request->requested_outputs) {
    bool known = std::any_of(config.output().begin(), config.output().end(),
                             [&](const auto& output) { return output.name() == name; });
    if (!known) return Status::InvalidArgument(ModelLabel(config) + " has no output named '" + name + "'");
  }
  const auto& batching_config = config.dynamic_batching();
  if (request->priority > 0 && batching_config.priority_levels() > 0 &&
      request->priority > batching_config.priority_levels()) {
    return Status::InvalidArgument(ModelLabel(config) + ": priority " + std::to_string(request->priority) +
                                   " is above priority_levels " +
                                   std::to_string(batching_config.priority_levels()));
  }
  request->inputs = std::move(ordered);
  return ValidatedRequest{std::move(request), batching ? batch_size : 1, shape_key};
}

}  // namespace inferd
