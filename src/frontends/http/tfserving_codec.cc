#include "frontends/http/tfserving_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>

#include "frontends/http/json_values.h"

namespace inferd {
namespace {

using rapidjson::Value;

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

constexpr int kMaxDepth = 32;

bool IsB64(const Value& value) {
  return value.IsObject() && value.MemberCount() == 1 && value.HasMember("b64") && value["b64"].IsString();
}

// A JSON object of named tensors (an instance or the columnar inputs), as opposed to a tensor.
bool IsNamedTensors(const Value& value) { return value.IsObject() && !IsB64(value); }

// The shape a nested list spells, read along the first elements (the flattening checks the rest).
StatusOr<Shape> NestedShape(const Value& value, const std::string& name) {
  Shape shape;
  const Value* at = &value;
  while (at->IsArray()) {
    if (shape.size() >= kMaxDepth) return Invalid("input '" + name + "': nested too deeply");
    shape.push_back(at->Size());
    if (at->Empty()) break;
    at = &(*at)[0];
  }
  return shape;
}

// One tensor's buffer as the elements arrive: fixed-size elements packed, BYTES serialized with
// their 4-byte length. The tensor then owns this string (no second copy).
struct Sink {
  DataType dtype;
  std::string data;
  int64_t count = 0;
};

// An empty buffer with room for `shape`'s elements; an error when `shape` claims more elements than
// the body has bytes (each element takes at least one, so such a shape cannot be honest).
StatusOr<Sink> SinkFor(const TfTensorSpec& spec, const Shape& shape, size_t body_size) {
  auto elements = ElementCount(shape, static_cast<int64_t>(body_size) + 1);
  if (!elements.ok()) return elements.status().WithPrefix("input '" + spec.name + "'");
  Sink sink{.dtype = spec.dtype};
  sink.data.reserve(static_cast<size_t>(*elements) * DataTypeSize(spec.dtype));
  return sink;
}

Status AppendLeaf(const Value& value, const std::string& name, Sink& sink) {
  if (sink.dtype == DataType::kBytes) {
    std::string decoded;
    std::string_view element;
    if (value.IsString()) {
      element = std::string_view(value.GetString(), value.GetStringLength());
    } else if (IsB64(value)) {
      auto bytes = Base64Decode(std::string_view(value["b64"].GetString(), value["b64"].GetStringLength()));
      if (!bytes) return Invalid("input '" + name + "': 'b64' is not valid base64");
      decoded = std::move(*bytes);
      element = decoded;
    } else {
      return Invalid("input '" + name + "': BYTES elements must be strings or {\"b64\": ...}");
    }
    const auto length = static_cast<uint32_t>(element.size());
    sink.data.append(reinterpret_cast<const char*>(&length), 4);
    sink.data.append(element);
  } else {
    const size_t size = DataTypeSize(sink.dtype);
    sink.data.resize(sink.data.size() + size);
    if (!StoreJsonScalar(value, sink.dtype, reinterpret_cast<uint8_t*>(sink.data.data()) + sink.data.size() - size)) {
      return Invalid("input '" + name + "': element " + std::to_string(sink.count) + " is not a valid " +
                     std::string(DataTypeName(sink.dtype)));
    }
  }
  ++sink.count;
  return Status::Ok();
}

Status Flatten(const Value& value, const Shape& shape, size_t depth, const std::string& name, Sink& sink) {
  if (depth == shape.size()) {
    if (value.IsArray()) return Invalid("input '" + name + "': ragged nesting (deeper than " + ShapeToString(shape) + ")");
    return AppendLeaf(value, name, sink);
  }
  if (!value.IsArray() || static_cast<int64_t>(value.Size()) != shape[depth]) {
    return Invalid("input '" + name + "': ragged nesting (not every list matches shape " + ShapeToString(shape) + ")");
  }
  for (const Value& item : value.GetArray()) RETURN_IF_ERROR(Flatten(item, shape, depth + 1, name, sink));
  return Status::Ok();
}

StatusOr<Tensor> ToTensor(const std::string& name, DataType dtype, Shape shape, Sink sink) {
  Tensor tensor;
  tensor.name = name;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  auto owner = std::make_shared<std::string>(std::move(sink.data));
  tensor.byte_size = owner->size();
  tensor.data = AliasData(owner, owner->data());
  return tensor;
}

const TfTensorSpec* FindSpec(const std::vector<TfTensorSpec>& inputs, std::string_view name) {
  auto it = std::find_if(inputs.begin(), inputs.end(), [&](const TfTensorSpec& s) { return s.name == name; });
  return it == inputs.end() ? nullptr : &*it;
}

// A bare tensor is the model's one input; `what` names the field for the error.
StatusOr<const TfTensorSpec*> SoleInput(const std::vector<TfTensorSpec>& inputs, const char* what) {
  if (inputs.size() != 1) {
    return Invalid(std::string(what) + " must name the inputs: the model has " + std::to_string(inputs.size()));
  }
  return &inputs[0];
}

// Columnar: each tensor as given.
Status ParseColumnar(const Value& value, const std::vector<TfTensorSpec>& inputs, size_t body_size, InferRequest* request) {
  std::vector<std::pair<const TfTensorSpec*, const Value*>> tensors;
  if (IsNamedTensors(value)) {
    for (const auto& member : value.GetObject()) {
      const TfTensorSpec* spec = FindSpec(inputs, member.name.GetString());
      if (spec == nullptr) return Invalid("unknown input '" + std::string(member.name.GetString()) + "'");
      tensors.emplace_back(spec, &member.value);
    }
  } else {
    ASSIGN_OR_RETURN(const TfTensorSpec* spec, SoleInput(inputs, "'inputs'"));
    tensors.emplace_back(spec, &value);
  }
  for (const auto& [spec, tensor_value] : tensors) {
    ASSIGN_OR_RETURN(Shape shape, NestedShape(*tensor_value, spec->name));
    ASSIGN_OR_RETURN(Sink sink, SinkFor(*spec, shape, body_size));
    RETURN_IF_ERROR(Flatten(*tensor_value, shape, 0, spec->name, sink));
    ASSIGN_OR_RETURN(Tensor tensor, ToTensor(spec->name, spec->dtype, std::move(shape), std::move(sink)));
    request->inputs.push_back(std::move(tensor));
  }
  return Status::Ok();
}

// Row: instance i of every input becomes entry i along a new dim 0.
Status ParseRows(const Value& instances, const std::vector<TfTensorSpec>& inputs, size_t body_size, InferRequest* request) {
  if (!instances.IsArray() || instances.Empty()) return Invalid("'instances' must be a non-empty list");
  const bool named = IsNamedTensors(instances[0]);
  std::vector<const TfTensorSpec*> specs;
  if (named) {
    for (const auto& member : instances[0].GetObject()) {
      const TfTensorSpec* spec = FindSpec(inputs, member.name.GetString());
      if (spec == nullptr) return Invalid("unknown input '" + std::string(member.name.GetString()) + "'");
      specs.push_back(spec);
    }
  } else {
    ASSIGN_OR_RETURN(const TfTensorSpec* spec, SoleInput(inputs, "each instance"));
    specs.push_back(spec);
  }
  for (const Value& instance : instances.GetArray()) {
    if (IsNamedTensors(instance) != named || (named && instance.MemberCount() != specs.size())) {
      return Invalid("every instance must have the same inputs");
    }
  }
  for (const TfTensorSpec* spec : specs) {
    auto value_of = [&](const Value& instance) -> const Value* {
      if (!named) return &instance;
      auto it = instance.FindMember(spec->name.c_str());
      return it == instance.MemberEnd() ? nullptr : &it->value;
    };
    const Value* first = value_of(instances[0]);
    ASSIGN_OR_RETURN(Shape inner, NestedShape(*first, spec->name));
    Shape shape = inner;
    shape.insert(shape.begin(), static_cast<int64_t>(instances.Size()));
    ASSIGN_OR_RETURN(Sink sink, SinkFor(*spec, shape, body_size));
    for (const Value& instance : instances.GetArray()) {
      const Value* value = value_of(instance);
      if (value == nullptr) return Invalid("every instance must have the same inputs (missing '" + spec->name + "')");
      RETURN_IF_ERROR(Flatten(*value, inner, 0, spec->name, sink));
    }
    ASSIGN_OR_RETURN(Tensor tensor, ToTensor(spec->name, spec->dtype, std::move(shape), std::move(sink)));
    request->inputs.push_back(std::move(tensor));
  }
  return Status::Ok();
}

// ---- response ----

class NestedWriter {
 public:
  NestedWriter(const Tensor& tensor, JsonWriter& w) : tensor_(tensor), w_(w) {
    if (tensor.dtype == DataType::kBytes) {
      ForEachBytesElement(tensor, [this](std::string_view element) { elements_.push_back(element); });
    }
    // TF Serving returns BYTES outputs whose name ends in "_bytes" base64-encoded.
    const std::string& name = tensor.name;
    base64_ = name.size() >= 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
  }

  // Elements [first, first + product(shape[depth:])) as nested lists.
  void Write(size_t depth, int64_t first) {
    const Shape& shape = tensor_.shape;
    if (depth == shape.size()) return WriteElement(static_cast<size_t>(first));
    if (depth + 1 == shape.size() && tensor_.dtype != DataType::kBytes) {
      // The innermost list in one call: one type dispatch per row, not per element.
      w_.StartArray();
      WriteJsonElements(tensor_, static_cast<size_t>(first), static_cast<size_t>(first + shape[depth]), w_);
      w_.EndArray();
      return;
    }
    int64_t stride = 1;
    for (size_t d = depth + 1; d < shape.size(); ++d) stride *= shape[d];
    w_.StartArray();
    for (int64_t i = 0; i < shape[depth]; ++i) Write(depth + 1, first + i * stride);
    w_.EndArray();
  }

 private:
  void WriteElement(size_t index) {
    if (tensor_.dtype != DataType::kBytes) return WriteJsonElements(tensor_, index, index + 1, w_);
    const std::string_view element = index < elements_.size() ? elements_[index] : std::string_view();
    if (!base64_) {
      w_.String(element.data(), static_cast<rapidjson::SizeType>(element.size()));
      return;
    }
    const std::string encoded = Base64Encode(element);
    w_.StartObject();
    w_.Key("b64");
    w_.String(encoded.c_str(), static_cast<rapidjson::SizeType>(encoded.size()));
    w_.EndObject();
  }

  const Tensor& tensor_;
  JsonWriter& w_;
  std::vector<std::string_view> elements_;
  bool base64_ = false;
};

void Key(JsonWriter& w, const std::string& key) { w.Key(key.c_str(), static_cast<rapidjson::SizeType>(key.size())); }

}  // namespace

StatusOr<TfPredictRequest> ParseTfPredictRequest(std::string_view body, const std::vector<TfTensorSpec>& inputs) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError()) {
    return Invalid(std::string("malformed JSON at offset ") + std::to_string(doc.GetErrorOffset()) + ": " +
                   rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Invalid("the request body must be a JSON object");
  if (auto signature = doc.FindMember("signature_name"); signature != doc.MemberEnd()) {
    if (!signature->value.IsString()) return Invalid("'signature_name' must be a string");
    const std::string name = signature->value.GetString();
    if (!name.empty() && name != "serving_default") return Invalid("unknown signature '" + name + "'; the model has serving_default");
  }
  const auto instances = doc.FindMember("instances");
  const auto columns = doc.FindMember("inputs");
  const bool rows = instances != doc.MemberEnd(), columnar = columns != doc.MemberEnd();
  if (rows == columnar) return Invalid("give exactly one of 'instances' (row format) and 'inputs' (columnar format)");
  TfPredictRequest parsed{std::make_unique<InferRequest>(), rows ? TfFormat::kRow : TfFormat::kColumnar};
  if (rows) {
    RETURN_IF_ERROR(ParseRows(instances->value, inputs, body.size(), parsed.request.get()));
    parsed.instances = static_cast<int64_t>(instances->value.Size());
  } else {
    RETURN_IF_ERROR(ParseColumnar(columns->value, inputs, body.size(), parsed.request.get()));
  }
  return parsed;
}

StatusOr<std::string> EncodeTfPredictResponse(const InferResponse& response, TfFormat format, int64_t instances) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  const bool single = response.outputs.size() == 1;
  if (format == TfFormat::kColumnar) {
    w.Key("outputs");
    if (!single) w.StartObject();
    for (const Tensor& output : response.outputs) {
      if (!single) Key(w, output.name);
      NestedWriter(output, w).Write(0, 0);
    }
    if (!single) w.EndObject();
  } else {
    for (const Tensor& output : response.outputs) {
      if (output.shape.empty() || output.shape[0] != instances) {
        return Status::InvalidArgument("output '" + output.name + "' has shape " + ShapeToString(output.shape) +
                                       ", not one entry per instance (" + std::to_string(instances) +
                                       "); ask in the columnar format ('inputs')");
      }
    }
    std::vector<NestedWriter> writers;
    writers.reserve(response.outputs.size());
    for (const Tensor& output : response.outputs) writers.emplace_back(output, w);
    w.Key("predictions");
    w.StartArray();
    for (int64_t i = 0; i < instances; ++i) {
      if (!single) w.StartObject();
      for (size_t o = 0; o < response.outputs.size(); ++o) {
        const Tensor& output = response.outputs[o];
        if (!single) Key(w, output.name);
        int64_t per_instance = 1;
        for (size_t d = 1; d < output.shape.size(); ++d) per_instance *= output.shape[d];
        writers[o].Write(1, i * per_instance);
      }
      if (!single) w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}


}  // namespace inferd
