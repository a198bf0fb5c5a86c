#include "frontends/grpc/grpc_codec.h"

#include <cmath>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <variant>
#include <limits>
#include <optional>
#include <utility>

#include "core/server_info.h"

namespace inferd {
namespace {

using ProtoParameter = inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using ParameterMap = google::protobuf::Map<std::string, ProtoParameter>;

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

// parameters[key] as a non-negative integer; clients send int64_param (KServe) or uint64_param
// (newer Triton clients).
StatusOr<std::optional<uint64_t>> UnsignedParameter(const ParameterMap& parameters, const std::string& key) {
  auto it = parameters.find(key);
  if (it == parameters.end()) return std::optional<uint64_t>();
  const ProtoParameter& value = it->second;
  if (value.parameter_choice_case() == ProtoParameter::kUint64Param)
    return std::optional<uint64_t>(value.uint64_param());
  if (value.parameter_choice_case() == ProtoParameter::kInt64Param && value.int64_param() >= 0)
    return std::optional<uint64_t>(static_cast<uint64_t>(value.int64_param()));
  return Invalid("request: parameter '" + key + "' must be a non-negative int64_param or uint64_param");
}

// The entries not in `known` (those the request has fields for) as InferParameters. A uint64
// beyond int64 is kept as a double.
Status ReadOtherParameters(const ParameterMap& parameters, std::initializer_list<std::string_view> known,
                           InferParameters* out) {
  for (const auto& [name, value] : parameters) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    switch (value.parameter_choice_case()) {
      case ProtoParameter::kBoolParam: out->push_back({name, value.bool_param()}); break;
      case ProtoParameter::kInt64Param: out->push_back({name, value.int64_param()}); break;
      case ProtoParameter::kUint64Param:
        if (std::in_range<int64_t>(value.uint64_param())) {
          out->push_back({name, static_cast<int64_t>(value.uint64_param())});
        } else {
          out->push_back({name, static_cast<double>(value.uint64_param())});
        }
        break;
      case ProtoParameter::kDoubleParam: out->push_back({name, value.double_param()}); break;
      case ProtoParameter::kStringParam: out->push_back({name, value.string_param()}); break;
      default: return Invalid("parameter '" + name + "' has no value");
    }
  }
  return Status::Ok();
}

void WriteParameters(const InferParameters& parameters, ParameterMap* out) {
  for (const InferParameter& parameter : parameters) {
    ProtoParameter& value = (*out)[parameter.name];
    std::visit(
        [&value](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            value.set_string_param(v);
          } else if constexpr (std::is_same_v<T, bool>) {
            value.set_bool_param(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            value.set_int64_param(v);
          } else {
            value.set_double_param(v);
          }
        },
        parameter.value);
  }
}

// Triton's shared-memory parameters of an input or output, if it has them: shared_memory_region
// and shared_memory_byte_size together, shared_memory_offset optional.
StatusOr<std::optional<SharedMemoryRef>> SharedMemoryRefOf(const ParameterMap& parameters, const std::string& where) {
  auto region = parameters.find("shared_memory_region");
  auto byte_size = UnsignedParameter(parameters, "shared_memory_byte_size");
  auto offset = UnsignedParameter(parameters, "shared_memory_offset");
  if (!byte_size.ok()) return byte_size.status().WithPrefix(where);
  if (!offset.ok()) return offset.status().WithPrefix(where);
  if (region == parameters.end() && !*byte_size && !*offset) return std::optional<SharedMemoryRef>();
  if (region == parameters.end() || region->second.parameter_choice_case() != ProtoParameter::kStringParam ||
      region->second.string_param().empty() || !*byte_size) {
    return Invalid(where + ": shared memory needs both shared_memory_region (a string_param) and shared_memory_byte_size");
  }
  return std::optional<SharedMemoryRef>(
      SharedMemoryRef{.region = region->second.string_param(), .offset = offset->value_or(0), .byte_size = **byte_size});
}

void WriteSharedMemoryRef(const SharedMemoryRef& ref, ParameterMap* out) {
  (*out)["shared_memory_region"].set_string_param(ref.region);
  (*out)["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(ref.byte_size));
  if (ref.offset != 0) (*out)["shared_memory_offset"].set_int64_param(static_cast<int64_t>(ref.offset));
}

Status ParseRequestParameters(const ParameterMap& parameters, InferRequest* request) {
  ASSIGN_OR_RETURN(std::optional<uint64_t> priority, UnsignedParameter(parameters, "priority"));
  if (priority) {
    if (*priority > std::numeric_limits<uint32_t>::max()) return Invalid("request: priority is too large");
    request->priority = static_cast<uint32_t>(*priority);
  }
  ASSIGN_OR_RETURN(std::optional<uint64_t> timeout, UnsignedParameter(parameters, "timeout"));
  if (timeout) request->timeout_us = *timeout;
  return ReadOtherParameters(parameters, {"priority", "timeout"}, &request->parameters);
}

// Copies typed `values` into a fresh buffer of `Element`s, refusing values the element type cannot
// hold (an int_contents value of 300 for an INT8 tensor) rather than wrapping them.
template <typename Element, typename Values>
StatusOr<Tensor> FromTypedValues(Tensor tensor, const Values& values, int64_t expected, const char* field) {
  if (static_cast<int64_t>(values.size()) != expected) {
    return Invalid("input '" + tensor.name + "': shape " + ShapeToString(tensor.shape) + " needs " +
                   std::to_string(expected) + " values, contents." + field + " has " +
                   std::to_string(values.size()));
  }
  tensor.byte_size = values.size() * sizeof(Element);
  MutableBuffer buffer = AllocateBuffer(tensor.byte_size);
  auto* out = reinterpret_cast<Element*>(buffer.get());
  for (int i = 0; i < values.size(); ++i) {
    const auto value = values.Get(i);
    if constexpr (std::is_integral_v<Element> && !std::is_same_v<Element, bool>) {
      if (!std::in_range<Element>(value)) {
        return Invalid("input '" + tensor.name + "': contents." + field + "[" + std::to_string(i) +
                       "] = " + std::to_string(value) + " is out of range for " +
                       std::string(DataTypeName(tensor.dtype)));
      }
    }
    out[i] = static_cast<Element>(value);
  }
  tensor.data = AliasData(buffer.memory, buffer.get());
  return tensor;
}

StatusOr<Tensor> FromBytesValues(Tensor tensor, const InferTensorContents& contents, int64_t expected) {
  const auto& values = contents.bytes_contents();
  if (static_cast<int64_t>(values.size()) != expected) {
    return Invalid("input '" + tensor.name + "': shape " + ShapeToString(tensor.shape) + " needs " +
                   std::to_string(expected) + " values, contents.bytes_contents has " +
                   std::to_string(values.size()));
  }
  auto serialized = std::make_shared<std::string>();
  size_t total = 0;
  for (const std::string& value : values) total += 4 + value.size();
  serialized->reserve(total);
  for (const std::string& value : values) {
    if (value.size() > std::numeric_limits<uint32_t>::max())
      return Invalid("input '" + tensor.name + "': a BYTES element is over 4 GiB");
    const uint32_t length = static_cast<uint32_t>(value.size());
    serialized->append(reinterpret_cast<const char*>(&length), 4);
    serialized->append(value);
  }
  tensor.byte_size = serialized->size();
  tensor.data = AliasData(serialized, serialized->data());
  return tensor;
}

StatusOr<Tensor> FromContents(Tensor tensor, const InferTensorContents& contents) {
  // No allocation happens before the value count matches the shape, so a huge shape with few
  // values is refused without reserving memory for it.
  auto counted = ElementCount(tensor.shape);
  if (!counted.ok()) return counted.status().WithPrefix("input '" + tensor.name + "'");
  const int64_t n = *counted;
  switch (tensor.dtype) {
    case DataType::kBool:
      return FromTypedValues<bool>(std::move(tensor), contents.bool_contents(), n, "bool_contents");
    case DataType::kInt8:
      return FromTypedValues<int8_t>(std::move(tensor), contents.int_contents(), n, "int_contents");
    case DataType::kInt16:
      return FromTypedValues<int16_t>(std::move(tensor), contents.int_contents(), n, "int_contents");
    case DataType::kInt32:
      return FromTypedValues<int32_t>(std::move(tensor), contents.int_contents(), n, "int_contents");
    case DataType::kInt64:
      return FromTypedValues<int64_t>(std::move(tensor), contents.int64_contents(), n, "int64_contents");
    case DataType::kUint8:
      return FromTypedValues<uint8_t>(std::move(tensor), contents.uint_contents(), n, "uint_contents");
    case DataType::kUint16:
      return FromTypedValues<uint16_t>(std::move(tensor), contents.uint_contents(), n, "uint_contents");
    case DataType::kUint32:
      return FromTypedValues<uint32_t>(std::move(tensor), contents.uint_contents(), n, "uint_contents");
    case DataType::kUint64:
      return FromTypedValues<uint64_t>(std::move(tensor), contents.uint64_contents(), n, "uint64_contents");
    case DataType::kFp32:
      return FromTypedValues<float>(std::move(tensor), contents.fp32_contents(), n, "fp32_contents");
    case DataType::kFp64:
      return FromTypedValues<double>(std::move(tensor), contents.fp64_contents(), n, "fp64_contents");
    case DataType::kBytes:
      return FromBytesValues(std::move(tensor), contents, n);
    default:
      return Invalid("input '" + tensor.name + "': " + std::string(DataTypeName(tensor.dtype)) +
                     " has no typed contents field; send it in raw_input_contents");
  }
}

// Points the tensor into the message's raw bytes. std::string storage is malloc-aligned except for
// short strings kept inside the string object, which are copied when misaligned for the type.
template <typename Message>
Tensor FromRaw(Tensor tensor, const std::shared_ptr<const Message>& message, const std::string& raw) {
  tensor.byte_size = raw.size();
  const size_t alignment = std::max<size_t>(1, DataTypeSize(tensor.dtype));
  if (reinterpret_cast<uintptr_t>(raw.data()) % alignment == 0) {
    tensor.data = AliasData(message, raw.data());
    return tensor;
  }
  MutableBuffer aligned = AllocateBuffer(raw.size());
  std::memcpy(aligned.get(), raw.data(), raw.size());
  tensor.data = AliasData(aligned.memory, aligned.get());
  return tensor;
}

template <typename TensorMessage>
StatusOr<Tensor> ParseInputHeader(const TensorMessage& input) {
  if (input.name().empty()) return Invalid("an input has no name");
  Tensor tensor;
  tensor.name = input.name();
  tensor.dtype = DataTypeFromName(input.datatype());
  if (tensor.dtype == DataType::kInvalid)
    return Invalid("input '" + tensor.name + "': unknown datatype '" + input.datatype() + "'");
  for (int64_t dim : input.shape()) {
    if (dim < 0) return Invalid("input '" + tensor.name + "': shape dims must be non-negative");
    tensor.shape.push_back(dim);
  }
  return tensor;
}

}  // namespace

StatusOr<std::unique_ptr<InferRequest>> ParseModelInferRequest(
    std::shared_ptr<const inference::ModelInferRequest> message) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = message->model_name();
  if (request->model_name.empty()) return Invalid("model_name is empty");
  if (!message->model_version().empty()) {
    ASSIGN_OR_RETURN(request->model_version, ParseModelVersion(message->model_version()));
  }
  request->id = message->id();
  RETURN_IF_ERROR(ParseRequestParameters(message->parameters(), request.get()));
  if (message->inputs().empty()) return Invalid("the request has no inputs");
  // raw_input_contents holds one entry per input not in shared memory, in the inputs' order.
  const bool raw = !message->raw_input_contents().empty();
  const auto in_shared_memory = std::count_if(message->inputs().begin(), message->inputs().end(), [](const auto& input) {
    return input.parameters().contains("shared_memory_region");
  });
  const int64_t raw_expected = message->inputs_size() - in_shared_memory;
  if (raw && message->raw_input_contents_size() != raw_expected) {
    return Invalid("raw_input_contents has " + std::to_string(message->raw_input_contents_size()) + " entries for " +
                   std::to_string(raw_expected) + " inputs (not counting those in shared memory)");
  }
  int raw_used = 0;
  request->inputs.reserve(message->inputs_size());
  for (int i = 0; i < message->inputs_size(); ++i) {
    const auto& input = message->inputs(i);
    ASSIGN_OR_RETURN(Tensor tensor, ParseInputHeader(input));
    ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> region,
                     SharedMemoryRefOf(input.parameters(), "input '" + tensor.name + "'"));
    if (region) {
      if (input.has_contents()) return Invalid("input '" + tensor.name + "': contents must be empty with shared_memory_region");
      tensor.byte_size = static_cast<size_t>(region->byte_size);  // the data: mapped in by the server
      request->input_regions.emplace_back(tensor.name, std::move(*region));
      request->inputs.push_back(std::move(tensor));
    } else if (raw) {
      if (input.has_contents()) {
        return Invalid("input '" + tensor.name +
                       "': contents must be empty when raw_input_contents is used");
      }
      request->inputs.push_back(FromRaw(std::move(tensor), message, message->raw_input_contents(raw_used++)));
    } else {
      ASSIGN_OR_RETURN(Tensor parsed, FromContents(std::move(tensor), input.contents()));
      request->inputs.push_back(std::move(parsed));
    }
  }
  for (const auto& output : message->outputs()) {
    if (output.name().empty()) return Invalid("a requested output has no name");
    if (auto classes = output.parameters().find("classification"); classes != output.parameters().end()) {
      const int64_t count = classes->second.int64_param();
      if (count <= 0 || count > std::numeric_limits<uint32_t>::max()) {
        return Invalid("output '" + output.name() + "': classification must be an int64_param count above 0");
      }
      request->classifications.emplace_back(output.name(), static_cast<uint32_t>(count));
    }
    ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> region,
                     SharedMemoryRefOf(output.parameters(), "output '" + output.name() + "'"));
    if (region) request->output_regions.emplace_back(output.name(), std::move(*region));
    request->requested_outputs.push_back(output.name());
  }
  return request;
}

void EncodeModelInferResponse(const InferResponse& response, inference::ModelInferResponse* out) {
  out->set_model_name(response.model_name);
  out->set_model_version(std::to_string(response.model_version));
  out->set_id(response.id);
  if (!response.parameters.empty()) WriteParameters(response.parameters, out->mutable_parameters());
  for (const Tensor& tensor : response.outputs) {
    auto* output = out->add_outputs();
    output->set_name(tensor.name);
    const std::string_view datatype = DataTypeName(tensor.dtype);
    output->set_datatype(datatype.data(), datatype.size());
    for (int64_t dim : tensor.shape) output->add_shape(dim);
    // An output in shared memory keeps its place in raw_output_contents, empty: clients read the
    // entries by position.
    std::string* raw = out->add_raw_output_contents();
    if (const SharedMemoryRef* region = FindRegion(response.output_regions, tensor.name); region != nullptr) {
      WriteSharedMemoryRef(*region, output->mutable_parameters());
    } else if (tensor.byte_size > 0) {
      raw->assign(reinterpret_cast<const char*>(tensor.data.get()), tensor.byte_size);
    }
  }
}

void EncodeModelInferRequest(const InferRequest& request, inference::ModelInferRequest* out) {
  out->set_model_name(request.model_name);
  if (request.model_version > 0) out->set_model_version(std::to_string(request.model_version));
  out->set_id(request.id);
  if (request.priority > 0) (*out->mutable_parameters())["priority"].set_uint64_param(request.priority);
  if (request.timeout_us > 0) (*out->mutable_parameters())["timeout"].set_uint64_param(request.timeout_us);
  WriteParameters(request.parameters, out->mutable_parameters());
  for (const Tensor& tensor : request.inputs) {
    auto* input = out->add_inputs();
    input->set_name(tensor.name);
    const std::string_view datatype = DataTypeName(tensor.dtype);
    input->set_datatype(datatype.data(), datatype.size());
    for (int64_t dim : tensor.shape) input->add_shape(dim);
    if (const SharedMemoryRef* region = FindRegion(request.input_regions, tensor.name); region != nullptr) {
      WriteSharedMemoryRef(*region, input->mutable_parameters());
      continue;
    }
    std::string* raw = out->add_raw_input_contents();
    if (tensor.byte_size > 0) raw->assign(reinterpret_cast<const char*>(tensor.data.get()), tensor.byte_size);
  }
  for (const std::string& name : request.requested_outputs) {
    auto* output = out->add_outputs();
    output->set_name(name);
    if (const SharedMemoryRef* region = FindRegion(request.output_regions, name); region != nullptr) {
      WriteSharedMemoryRef(*region, output->mutable_parameters());
    }
  }
}

StatusOr<InferResponse> ParseModelInferResponse(std::shared_ptr<const inference::ModelInferResponse> message) {
  InferResponse response;
  response.model_name = message->model_name();
  if (!message->model_version().empty()) {
    ASSIGN_OR_RETURN(response.model_version, ParseModelVersion(message->model_version()));
  }
  response.id = message->id();
  RETURN_IF_ERROR(ReadOtherParameters(message->parameters(), {}, &response.parameters));
  const bool raw = !message->raw_output_contents().empty();
  if (raw && message->raw_output_contents_size() != message->outputs_size())
    return Invalid("the response has " + std::to_string(message->raw_output_contents_size()) +
                   " raw_output_contents for " + std::to_string(message->outputs_size()) + " outputs");
  for (int i = 0; i < message->outputs_size(); ++i) {
    ASSIGN_OR_RETURN(Tensor tensor, ParseInputHeader(message->outputs(i)));
    ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> region,
                     SharedMemoryRefOf(message->outputs(i).parameters(), "output '" + tensor.name + "'"));
    if (region) {
      response.output_regions.emplace_back(tensor.name, std::move(*region));
      response.outputs.push_back(std::move(tensor));
    } else if (raw) {
      response.outputs.push_back(FromRaw(std::move(tensor), message, message->raw_output_contents(i)));
    } else {
      ASSIGN_OR_RETURN(Tensor parsed, FromContents(std::move(tensor), message->outputs(i).contents()));
      response.outputs.push_back(std::move(parsed));
    }
  }
  return response;
}

StatusOr<LoadOverride> ParseLoadParameters(const inference::RepositoryModelLoadRequest& request) {
  LoadOverride override;
  for (const auto& [key, value] : request.parameters()) {
    if (key == "config") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return Status::InvalidArgument("parameter 'config' must be a string_param holding the config as JSON");
      }
      override.config_json = value.string_param();
    } else if (key.starts_with("file:")) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return Status::InvalidArgument("parameter '" + key + "' must be a bytes_param with the file's contents");
      }
      override.files[key.substr(5)] = value.bytes_param();
    } else {
      return Status::InvalidArgument("unknown load parameter '" + key + "' (expected 'config' or 'file:<path>')");
    }
  }
  return override;
}

StatusOr<TrafficChange> ParseTrafficChange(const lifecycle::TrafficRequest& request) {
  TrafficChange change;
  if (request.has_split()) {
    change.split.emplace();
    for (const auto& [version, weight] : request.split().weights()) {
      if (version <= 0) return Status::InvalidArgument("split: " + std::to_string(version) + " is not a version");
      if (weight > 1000000) {
        return Status::InvalidArgument("split: the weight of version " + std::to_string(version) + " is above 1000000");
      }
      (*change.split)[version] = weight;
    }
  }
  if (request.has_labels()) {
    change.labels.emplace();
    for (const auto& [label, version] : request.labels().labels()) {
      if (label.empty() || version <= 0) {
        return Status::InvalidArgument("labels: '" + label + "' -> " + std::to_string(version) +
                                       " is not a label and a version");
      }
      (*change.labels)[label] = version;
    }
  }
  if (!change.split && !change.labels) return Status::InvalidArgument("SetTraffic needs a split or labels");
  return change;
}

StatusOr<RolloutPlan> ParseRolloutPlan(const lifecycle::RolloutPlan& message) {
  RolloutPlan plan;
  if (message.version() <= 0) return Status::InvalidArgument("the rollout plan needs 'version': the version to roll out");
  plan.version = message.version();
  if (message.baseline() < 0) return Status::InvalidArgument("the rollout's 'baseline' must be a version");
  plan.baseline = message.baseline();
  if (message.steps_size() > 0) plan.steps.assign(message.steps().begin(), message.steps().end());
  if (message.has_dwell_seconds()) {
    const double seconds = message.dwell_seconds();
    if (!(seconds >= 0 && seconds <= 86400.0 * 365)) return Status::InvalidArgument("'dwell_seconds' must be within a year");
    plan.dwell = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  }
  if (message.has_max_error_rate()) plan.max_error_rate = message.max_error_rate();
  if (message.has_max_p99_ratio()) plan.max_p99_ratio = message.max_p99_ratio();
  if (message.has_min_requests()) plan.min_requests = message.min_requests();
  if (message.has_retention_seconds()) plan.retention_seconds = message.retention_seconds();
  if (message.has_agreement()) {
    const lifecycle::AgreementGuard& guard = message.agreement();
    AgreementGuard& agreement = plan.agreement.emplace();
    agreement.min_agreement = guard.min();
    if (guard.has_mirror_percent()) agreement.mirror_percent = guard.mirror_percent();
    if (guard.compare() == "argmax") {
      agreement.compare = AgreementGuard::Compare::kArgmax;
    } else if (!guard.compare().empty() && guard.compare() != "close") {
      return Status::InvalidArgument("the rollout's agreement 'compare' must be \"close\" or \"argmax\"");
    }
    if (guard.has_tolerance()) agreement.tolerance = guard.tolerance();
  }
  return plan;
}

void EncodeRolloutPlan(const RolloutPlan& plan, lifecycle::RolloutPlan* out) {
  out->set_version(plan.version);
  out->set_baseline(plan.baseline);
  for (uint32_t step : plan.steps) out->add_steps(step);
  out->set_dwell_seconds(static_cast<double>(plan.dwell.count()) / 1e3);
  out->set_max_error_rate(plan.max_error_rate);
  out->set_max_p99_ratio(plan.max_p99_ratio);
  out->set_min_requests(plan.min_requests);
  if (plan.retention_seconds) out->set_retention_seconds(*plan.retention_seconds);
  if (const auto& guard = plan.agreement) {
    lifecycle::AgreementGuard* agreement = out->mutable_agreement();
    agreement->set_min(guard->min_agreement);
    agreement->set_mirror_percent(guard->mirror_percent);
    agreement->set_compare(guard->compare == AgreementGuard::Compare::kArgmax ? "argmax" : "close");
    agreement->set_tolerance(guard->tolerance);
  }
}

}  // namespace inferd
