#include "frontends/http/kserve_codec.h"

#include "common/string_pool.h"
#include "frontends/http/json_values.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace inferd {
namespace {

using rapidjson::Value;

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

// ---- JSON data -> typed buffer ----------------------------------------------------------------

struct FlattenState {
  DataType dtype;
  int64_t expected;  // elements the shape asks for
  int64_t written = 0;
  uint8_t* out = nullptr;        // fixed-size types
  std::string* bytes = nullptr;  // BYTES: length-prefixed serialisation
};

// Walks nested or flat `data` in row-major order. Depth is bounded to keep recursion safe.
Status Flatten(const Value& value, FlattenState& state, const std::string& input, int depth) {
  if (depth > 64) return Invalid("input '" + input + "': data is nested too deeply");
  if (value.IsArray()) {
    for (const auto& item : value.GetArray()) RETURN_IF_ERROR(Flatten(item, state, input, depth + 1));
    return Status::Ok();
  }
  if (state.written >= state.expected) {
    return Invalid("input '" + input + "': data has more elements than its shape (" +
                   std::to_string(state.expected) + ")");
  }
  if (state.dtype == DataType::kBytes) {
    if (!value.IsString()) return Invalid("input '" + input + "': BYTES data must be strings");
    uint32_t length = value.GetStringLength();
    state.bytes->append(reinterpret_cast<const char*>(&length), 4);
    state.bytes->append(value.GetString(), length);
  } else {
    const size_t size = DataTypeSize(state.dtype);
    if (!StoreJsonScalar(value, state.dtype, state.out + static_cast<size_t>(state.written) * size)) {
      return Invalid("input '" + input + "': element " + std::to_string(state.written) + " is not a valid " +
                     std::string(DataTypeName(state.dtype)));
    }
  }
  ++state.written;
  return Status::Ok();
}

StatusOr<Shape> ParseShape(const Value& input, const std::string& name) {
  auto it = input.FindMember("shape");
  if (it == input.MemberEnd() || !it->value.IsArray()) {
    return Invalid("input '" + name + "': 'shape' must be an array of integers");
  }
  Shape shape;
  for (const auto& dim : it->value.GetArray()) {
    if (!dim.IsInt64() || dim.GetInt64() < 0) {
      return Invalid("input '" + name + "': 'shape' must hold non-negative integers");
    }
    shape.push_back(dim.GetInt64());
  }
  return shape;
}

StatusOr<Tensor> ParseJsonData(const Value& input, Tensor tensor, size_t body_size) {
  auto data = input.FindMember("data");
  if (data == input.MemberEnd()) {
    return Invalid("input '" + tensor.name + "': needs 'data' or parameters.binary_data_size");
  }
  // Each JSON element takes at least one byte of body, so a larger shape cannot be honest: refuse
  // it before allocating anything.
  auto elements = ElementCount(tensor.shape, static_cast<int64_t>(body_size) + 1);
  if (!elements.ok()) return elements.status().WithPrefix("input '" + tensor.name + "'");
  FlattenState state{.dtype = tensor.dtype, .expected = *elements};
  std::shared_ptr<uint8_t[]> fixed;
  auto bytes = std::make_shared<std::string>();
  if (tensor.dtype == DataType::kBytes) {
    state.bytes = bytes.get();
  } else {
    tensor.byte_size = static_cast<size_t>(*elements) * DataTypeSize(tensor.dtype);
    MutableBuffer buffer = AllocateBuffer(tensor.byte_size);
    fixed = buffer.memory;
    state.out = buffer.get();
  }
  RETURN_IF_ERROR(Flatten(data->value, state, tensor.name, 0));
  if (state.written != state.expected) {
    return Invalid("input '" + tensor.name + "': shape " + ShapeToString(tensor.shape) + " needs " +
                   std::to_string(state.expected) + " elements, data has " + std::to_string(state.written));
  }
  if (tensor.dtype == DataType::kBytes) {
    tensor.byte_size = bytes->size();
    tensor.data = AliasData(bytes, bytes->data());
  } else {
    tensor.data = AliasData(fixed, fixed.get());
  }
  return tensor;
}

// Reads parameters.<key> as an unsigned integer, if present.
StatusOr<std::optional<uint64_t>> UintParameter(const Value& owner, const char* key,
                                                const std::string& where) {
  auto params = owner.FindMember("parameters");
  if (params == owner.MemberEnd()) return std::optional<uint64_t>();
  if (!params->value.IsObject()) return Invalid(where + ": 'parameters' must be an object");
  auto it = params->value.FindMember(key);
  if (it == params->value.MemberEnd()) return std::optional<uint64_t>();
  if (!it->value.IsUint64())
    return Invalid(where + ": parameter '" + key + "' must be a non-negative integer");
  return std::optional<uint64_t>(it->value.GetUint64());
}

std::optional<bool> BoolParameter(const Value& owner, const char* key) {
  auto params = owner.FindMember("parameters");
  if (params == owner.MemberEnd() || !params->value.IsObject()) return std::nullopt;
  auto it = params->value.FindMember(key);
  if (it == params->value.MemberEnd() || !it->value.IsBool()) return std::nullopt;
  return it->value.GetBool();
}

std::optional<std::string_view> StringParameter(const Value& owner, const char* key) {
  auto params = owner.FindMember("parameters");
  if (params == owner.MemberEnd() || !params->value.IsObject()) return std::nullopt;
  auto it = params->value.FindMember(key);
  if (it == params->value.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

// Triton's shared-memory parameters of an input or output, if it has them: shared_memory_region
// and shared_memory_byte_size together, shared_memory_offset optional.
StatusOr<std::optional<SharedMemoryRef>> ParseSharedMemoryRef(const Value& owner, const std::string& where) {
  ASSIGN_OR_RETURN(std::optional<uint64_t> byte_size, UintParameter(owner, "shared_memory_byte_size", where));
  ASSIGN_OR_RETURN(std::optional<uint64_t> offset, UintParameter(owner, "shared_memory_offset", where));
  const std::optional<std::string_view> region = StringParameter(owner, "shared_memory_region");
  if (!region && !byte_size && !offset) return std::optional<SharedMemoryRef>();
  if (!region || region->empty() || !byte_size) {
    return Invalid(where + ": shared memory needs both shared_memory_region (a string) and shared_memory_byte_size");
  }
  return std::optional<SharedMemoryRef>(SharedMemoryRef{.region = std::string(*region), .offset = offset.value_or(0),
                                                        .byte_size = *byte_size});
}

struct BinaryCursor {
  std::shared_ptr<const std::string> body;
  size_t offset;  // next unread byte of the binary region
};

// An input of a request, or an output of a response (same JSON). A tensor in shared memory is
// added to `regions` and comes back without data.
StatusOr<Tensor> ParseInput(const Value& input, BinaryCursor& cursor, size_t json_size, SharedMemoryRefs& regions) {
  if (!input.IsObject()) return Invalid("each entry of 'inputs' must be an object");
  auto name = input.FindMember("name");
  if (name == input.MemberEnd() || !name->value.IsString()) return Invalid("an input has no 'name' string");
  Tensor tensor;
  tensor.name = name->value.GetString();
  auto datatype = input.FindMember("datatype");
  if (datatype == input.MemberEnd() || !datatype->value.IsString()) {
    return Invalid("input '" + tensor.name + "': 'datatype' must be a string");
  }
  tensor.dtype = DataTypeFromName(datatype->value.GetString());
  if (tensor.dtype == DataType::kInvalid) {
    return Invalid("input '" + tensor.name + "': unknown datatype '" + datatype->value.GetString() + "'");
  }
  ASSIGN_OR_RETURN(tensor.shape, ParseShape(input, tensor.name));
  ASSIGN_OR_RETURN(std::optional<uint64_t> binary_size,
                   UintParameter(input, "binary_data_size", "input '" + tensor.name + "'"));
  ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> region, ParseSharedMemoryRef(input, "input '" + tensor.name + "'"));
  if (region) {
    if (binary_size || input.HasMember("data")) {
      return Invalid("input '" + tensor.name + "': 'data' and binary_data_size must be absent with shared_memory_region");
    }
    tensor.byte_size = static_cast<size_t>(region->byte_size);  // the data: mapped in by the server
    regions.emplace_back(tensor.name, std::move(*region));
    return tensor;
  }
  if (!binary_size) return ParseJsonData(input, std::move(tensor), json_size);
  const size_t available = cursor.body->size() - cursor.offset;
  if (*binary_size > available) {
    return Invalid("input '" + tensor.name + "': binary_data_size " + std::to_string(*binary_size) +
                   " exceeds the " + std::to_string(available) + " bytes of binary data left");
  }
  const char* start = cursor.body->data() + cursor.offset;
  tensor.byte_size = static_cast<size_t>(*binary_size);
  cursor.offset += tensor.byte_size;
  const size_t alignment = std::max<size_t>(1, DataTypeSize(tensor.dtype));
  if (reinterpret_cast<uintptr_t>(start) % alignment == 0) {
    tensor.data = AliasData(cursor.body, start);  // zero copy: the tensor points into the body
    return tensor;
  }
  // The JSON header's length decides where the tensor starts; kernels need aligned elements.
  MutableBuffer aligned = AllocateBuffer(tensor.byte_size);
  std::memcpy(aligned.get(), start, tensor.byte_size);
  tensor.data = AliasData(aligned.memory, aligned.get());
  return tensor;
}

// A `parameters` object's entries as InferParameters, leaving out the keys `known` (those the
// request has fields for). Objects and arrays are refused: KServe parameters are scalars.
Status ReadParameters(const Value& owner, std::initializer_list<std::string_view> known, InferParameters* out) {
  auto params = owner.FindMember("parameters");
  if (params == owner.MemberEnd() || !params->value.IsObject()) return Status::Ok();
  for (const auto& member : params->value.GetObject()) {
    const std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (std::ranges::find(known, name) != known.end()) continue;
    const Value& value = member.value;
    if (value.IsString()) {
      out->push_back({std::string(name), std::string(value.GetString(), value.GetStringLength())});
    } else if (value.IsBool()) {
      out->push_back({std::string(name), value.GetBool()});
    } else if (value.IsInt64()) {
      out->push_back({std::string(name), value.GetInt64()});
    } else if (value.IsNumber()) {
      out->push_back({std::string(name), value.GetDouble()});
    } else {
      return Invalid("parameter '" + std::string(name) + "' must be a number, a string or a bool");
    }
  }
  return Status::Ok();
}

void WriteParameterValue(const InferParameter& parameter, JsonWriter& w) {
  w.Key(parameter.name.c_str(), static_cast<rapidjson::SizeType>(parameter.name.size()));
  std::visit(
      [&w](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
        } else if constexpr (std::is_same_v<T, bool>) {
          w.Bool(value);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.Int64(value);
        } else {
          w.Double(value);
        }
      },
      parameter.value);
}

Status ParseRequestParameters(const Value& root, InferRequest* request, OutputEncoding* encoding) {
  RETURN_IF_ERROR(ReadParameters(root, {"priority", "timeout", "binary_data_output"}, &request->parameters));
  ASSIGN_OR_RETURN(std::optional<uint64_t> priority, UintParameter(root, "priority", "request"));
  if (priority) {
    if (*priority > std::numeric_limits<uint32_t>::max()) return Invalid("request: priority is too large");
    request->priority = static_cast<uint32_t>(*priority);
  }
  ASSIGN_OR_RETURN(std::optional<uint64_t> timeout, UintParameter(root, "timeout", "request"));
  if (timeout) request->timeout_us = *timeout;
  encoding->binary_by_default = BoolParameter(root, "binary_data_output").value_or(false);
  return Status::Ok();
}

Status ParseRequestedOutputs(const Value& root, InferRequest* request, OutputEncoding* encoding) {
  auto outputs = root.FindMember("outputs");
  if (outputs == root.MemberEnd()) return Status::Ok();
  if (!outputs->value.IsArray()) return Invalid("'outputs' must be an array");
  for (const auto& output : outputs->value.GetArray()) {
    if (!output.IsObject()) return Invalid("each entry of 'outputs' must be an object");
    auto name = output.FindMember("name");
    if (name == output.MemberEnd() || !name->value.IsString())
      return Invalid("an output has no 'name' string");
    std::string output_name = name->value.GetString();
    ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> region, ParseSharedMemoryRef(output, "output '" + output_name + "'"));
    if (region) request->output_regions.emplace_back(output_name, std::move(*region));
    if (auto binary = BoolParameter(output, "binary_data")) {
      (*binary ? encoding->binary_outputs : encoding->json_outputs).push_back(output_name);
    }
    ASSIGN_OR_RETURN(std::optional<uint64_t> classes, UintParameter(output, "classification", "output '" + output_name + "'"));
    if (classes) {
      if (*classes == 0 || *classes > std::numeric_limits<uint32_t>::max()) {
        return Invalid("output '" + output_name + "': classification must be a count of classes above 0");
      }
      request->classifications.emplace_back(output_name, static_cast<uint32_t>(*classes));
    }
    request->requested_outputs.push_back(std::move(output_name));
  }
  return Status::Ok();
}

// ---- typed buffer -> JSON data --------------------------------------------------------------

void WriteJsonData(const Tensor& tensor, JsonWriter& w) {
  w.StartArray();
  if (tensor.dtype == DataType::kBytes) {
    ForEachBytesElement(tensor, [&](std::string_view element) {
      w.String(element.data(), static_cast<rapidjson::SizeType>(element.size()));
    });
  } else if (const size_t size = DataTypeSize(tensor.dtype); size > 0) {
    WriteJsonElements(tensor, 0, tensor.byte_size / size, w);
  }
  w.EndArray();
}

void WriteSharedMemoryParameters(const SharedMemoryRef& region, JsonWriter& w) {
  w.Key("shared_memory_region");
  w.String(region.region.c_str(), static_cast<rapidjson::SizeType>(region.region.size()));
  w.Key("shared_memory_byte_size");
  w.Uint64(region.byte_size);
  if (region.offset != 0) {
    w.Key("shared_memory_offset");
    w.Uint64(region.offset);
  }
}

// One entry of a request's `inputs` or a response's `outputs`: name, datatype, shape, then either
// where its bytes lie in shared memory, parameters.binary_data_size (the bytes follow the JSON) or
// `data`.
void WriteTensor(const Tensor& tensor, bool binary, const SharedMemoryRef* region, JsonWriter& w) {
  w.StartObject();
  w.Key("name");
  w.String(tensor.name.c_str(), static_cast<rapidjson::SizeType>(tensor.name.size()));
  w.Key("datatype");
  w.String(DataTypeName(tensor.dtype).data());
  w.Key("shape");
  w.StartArray();
  for (int64_t dim : tensor.shape) w.Int64(dim);
  w.EndArray();
  if (region != nullptr) {
    w.Key("parameters");
    w.StartObject();
    WriteSharedMemoryParameters(*region, w);
    w.EndObject();
  } else if (binary) {
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_size");
    w.Uint64(tensor.byte_size);
    w.EndObject();
  } else {
    w.Key("data");
    WriteJsonData(tensor, w);
  }
  w.EndObject();
}

// Per-thread buffers are kept up to this size; a larger answer's buffer is released after use.
constexpr size_t kKeptEncodeBufferBytes = 1 << 20;
constexpr size_t kParseStackBytes = 1024;

// The JSON, then each binary tensor's bytes, in one allocation.
EncodedBody JoinBody(const rapidjson::StringBuffer& json, const std::vector<const Tensor*>& binary) {
  EncodedBody encoded;
  size_t total = json.GetSize();
  for (const Tensor* tensor : binary) total += tensor->byte_size;
  encoded.body = BodyStringPool().Take(total);
  encoded.body.assign(json.GetString(), json.GetSize());
  if (binary.empty()) return encoded;
  encoded.json_length = json.GetSize();
  for (const Tensor* tensor : binary) {
    if (tensor->byte_size > 0) encoded.body.append(reinterpret_cast<const char*>(tensor->data.get()), tensor->byte_size);
  }
  return encoded;
}

}  // namespace

bool OutputEncoding::IsBinary(std::string_view name) const {
  if (std::find(binary_outputs.begin(), binary_outputs.end(), name) != binary_outputs.end()) return true;
  if (std::find(json_outputs.begin(), json_outputs.end(), name) != json_outputs.end()) return false;
  return binary_by_default;
}

StatusOr<ParsedInferRequest> ParseInferRequest(std::shared_ptr<const std::string> body,
                                               std::optional<size_t> json_length) {
  const size_t json_size = json_length.value_or(body->size());
  if (json_size > body->size()) {
    return Invalid("Inference-Header-Content-Length " + std::to_string(json_size) +
                   " is larger than the body (" + std::to_string(body->size()) + " bytes)");
  }
  // The DOM and the parser's stack live in a per-thread arena: a small request parses without
  // touching malloc (RapidJSON's default pool would allocate 64 KiB per request, and its stack
  // grows by reallocation).
  thread_local char arena[32 * 1024];
  rapidjson::MemoryPoolAllocator<> allocator(arena, sizeof(arena));
  rapidjson::GenericDocument<rapidjson::UTF8<>, rapidjson::MemoryPoolAllocator<>, rapidjson::MemoryPoolAllocator<>>
      doc(&allocator, kParseStackBytes, &allocator);
  doc.Parse(body->data(), json_size);
  if (doc.HasParseError()) {
    return Invalid(std::string("malformed JSON at offset ") + std::to_string(doc.GetErrorOffset()) + ": " +
                   rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Invalid("the request body must be a JSON object");
  ParsedInferRequest parsed{std::make_unique<InferRequest>(), {}};
  InferRequest* request = parsed.request.get();
  if (auto id = doc.FindMember("id"); id != doc.MemberEnd()) {
    if (!id->value.IsString()) return Invalid("'id' must be a string");
    request->id = id->value.GetString();
  }
  RETURN_IF_ERROR(ParseRequestParameters(doc, request, &parsed.encoding));
  auto inputs = doc.FindMember("inputs");
  if (inputs == doc.MemberEnd() || !inputs->value.IsArray()) return Invalid("'inputs' must be an array");
  if (inputs->value.Empty()) return Invalid("'inputs' is empty");
  BinaryCursor cursor{body, json_size};
  for (const auto& input : inputs->value.GetArray()) {
    ASSIGN_OR_RETURN(Tensor tensor, ParseInput(input, cursor, json_size, request->input_regions));
    request->inputs.push_back(std::move(tensor));
  }
  if (cursor.offset != body->size()) {
    return Invalid(std::to_string(body->size() - cursor.offset) +
                   " bytes of binary data are not claimed by any input's binary_data_size");
  }
  RETURN_IF_ERROR(ParseRequestedOutputs(doc, request, &parsed.encoding));
  return parsed;
}

EncodedResponse EncodeInferResponse(const InferResponse& response, const OutputEncoding& encoding) {
  // Reused by the thread: growing a fresh buffer cost a few reallocations per answer.
  thread_local rapidjson::StringBuffer buffer;
  buffer.Clear();
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model_name");
  w.String(response.model_name.c_str(), static_cast<rapidjson::SizeType>(response.model_name.size()));
  w.Key("model_version");
  w.String(std::to_string(response.model_version).c_str());
  if (!response.id.empty()) {
    w.Key("id");
    w.String(response.id.c_str(), static_cast<rapidjson::SizeType>(response.id.size()));
  }
  if (!response.parameters.empty()) {
    w.Key("parameters");
    w.StartObject();
    for (const InferParameter& parameter : response.parameters) WriteParameterValue(parameter, w);
    w.EndObject();
  }
  w.Key("outputs");
  w.StartArray();
  std::vector<const Tensor*> binary;
  for (const Tensor& tensor : response.outputs) {
    const SharedMemoryRef* region = FindRegion(response.output_regions, tensor.name);
    const bool as_binary = region == nullptr && encoding.IsBinary(tensor.name);
    WriteTensor(tensor, as_binary, region, w);
    if (as_binary) binary.push_back(&tensor);
  }
  w.EndArray();
  w.EndObject();
  EncodedResponse encoded = JoinBody(buffer, binary);
  if (buffer.GetSize() > kKeptEncodeBufferBytes) {
    buffer.Clear();
    buffer.ShrinkToFit();
  }
  return encoded;
}

EncodedRequest EncodeInferRequest(const InferRequest& request, bool binary) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  if (!request.id.empty()) {
    w.Key("id");
    w.String(request.id.c_str(), static_cast<rapidjson::SizeType>(request.id.size()));
  }
  w.Key("parameters");
  w.StartObject();
  if (request.priority > 0) {
    w.Key("priority");
    w.Uint(request.priority);
  }
  if (request.timeout_us > 0) {
    w.Key("timeout");
    w.Uint64(request.timeout_us);
  }
  w.Key("binary_data_output");
  w.Bool(binary);
  for (const InferParameter& parameter : request.parameters) WriteParameterValue(parameter, w);
  w.EndObject();
  w.Key("inputs");
  w.StartArray();
  std::vector<const Tensor*> binary_inputs;
  for (const Tensor& tensor : request.inputs) {
    const SharedMemoryRef* region = FindRegion(request.input_regions, tensor.name);
    WriteTensor(tensor, binary, region, w);
    if (binary && region == nullptr) binary_inputs.push_back(&tensor);
  }
  w.EndArray();
  if (!request.requested_outputs.empty()) {
    w.Key("outputs");
    w.StartArray();
    for (const std::string& name : request.requested_outputs) {
      w.StartObject();
      w.Key("name");
      w.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      w.Key("parameters");
      w.StartObject();
      if (const SharedMemoryRef* region = FindRegion(request.output_regions, name); region != nullptr) {
        WriteSharedMemoryParameters(*region, w);
      } else {
        w.Key("binary_data");
        w.Bool(binary);
      }
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return JoinBody(buffer, binary_inputs);
}

StatusOr<LoadOverride> ParseLoadRequest(std::string_view body) {
  LoadOverride override;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return override;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return Invalid("the load request body is not a JSON object");
  for (const auto& member : doc.GetObject()) {
    if (std::string_view(member.name.GetString()) != "parameters") {
      return Invalid("unknown field '" + std::string(member.name.GetString()) + "' in the load request");
    }
  }
  auto parameters = doc.FindMember("parameters");
  if (parameters == doc.MemberEnd()) return override;
  if (!parameters->value.IsObject()) return Invalid("'parameters' must be an object");
  for (const auto& [key_value, value] : parameters->value.GetObject()) {
    const std::string key = key_value.GetString();
    if (key == "config") {
      if (!value.IsString()) return Invalid("parameter 'config' must be a string holding the config as JSON");
      override.config_json = value.GetString();
    } else if (key.starts_with("file:")) {
      auto contents = value.IsString() ? Base64Decode(value.GetString()) : std::nullopt;
      if (!contents) return Invalid("parameter '" + key + "' must be the file's contents in base64");
      override.files[key.substr(5)] = std::move(*contents);
    } else {
      return Invalid("unknown load parameter '" + key + "' (expected 'config' or 'file:<path>')");
    }
  }
  return override;
}

StatusOr<InferResponse> ParseInferResponse(std::shared_ptr<const std::string> body,
                                           std::optional<size_t> json_length) {
  const size_t json_size = json_length.value_or(body->size());
  if (json_size > body->size()) return Invalid("Inference-Header-Content-Length is larger than the body");
  rapidjson::Document doc;
  doc.Parse(body->data(), json_size);
  if (doc.HasParseError() || !doc.IsObject()) return Invalid("the response is not a JSON object");
  InferResponse response;
  if (auto name = doc.FindMember("model_name"); name != doc.MemberEnd() && name->value.IsString())
    response.model_name = name->value.GetString();
  if (auto version = doc.FindMember("model_version"); version != doc.MemberEnd() && version->value.IsString())
    response.model_version = std::strtoll(version->value.GetString(), nullptr, 10);
  if (auto id = doc.FindMember("id"); id != doc.MemberEnd() && id->value.IsString()) response.id = id->value.GetString();
  RETURN_IF_ERROR(ReadParameters(doc, {}, &response.parameters));
  auto outputs = doc.FindMember("outputs");
  if (outputs == doc.MemberEnd() || !outputs->value.IsArray()) return Invalid("the response has no 'outputs' array");
  BinaryCursor cursor{body, json_size};
  for (const auto& output : outputs->value.GetArray()) {
    ASSIGN_OR_RETURN(Tensor tensor, ParseInput(output, cursor, json_size, response.output_regions));
    response.outputs.push_back(std::move(tensor));
  }
  return response;
}

StatusOr<SharedMemoryRegistration> ParseSharedMemoryRegistration(std::string_view body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("the register request body is not a JSON object");
  SharedMemoryRegistration registration;
  for (const auto& member : doc.GetObject()) {
    const std::string_view field(member.name.GetString(), member.name.GetStringLength());
    if (field == "key" && member.value.IsString()) {
      registration.key.assign(member.value.GetString(), member.value.GetStringLength());
    } else if ((field == "offset" || field == "byte_size") && member.value.IsUint64()) {
      (field == "offset" ? registration.offset : registration.byte_size) = member.value.GetUint64();
    } else if (field == "key" || field == "offset" || field == "byte_size") {
      return Status::InvalidArgument("'" + std::string(field) + "' must be " +
                                     (field == "key" ? "a string" : "a non-negative integer"));
    } else {
      return Status::InvalidArgument("unknown field '" + std::string(field) + "' in the register request");
    }
  }
  if (registration.key.empty()) return Status::InvalidArgument("the register request needs a 'key'");
  if (!doc.HasMember("byte_size")) return Status::InvalidArgument("the register request needs a 'byte_size'");
  return registration;
}

std::string ErrorJson(std::string_view message) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

}  // namespace inferd
