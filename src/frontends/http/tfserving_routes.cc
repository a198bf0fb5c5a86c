#include "frontends/http/tfserving_routes.h"

#include <spdlog/spdlog.h>

#include <map>

#include "config/model_config.h"
#include "core/server_info.h"
#include "frontends/http/http_responses.h"
#include "frontends/http/json_values.h"
#include "frontends/http/tfserving_codec.h"

namespace inferd {
namespace {

// "/v1/models/M[/versions/V|/labels/L][:predict|/metadata]" parsed.
struct TfTarget {
  std::string name;
  int64_t version = 0;  // 0: the newest
  std::string label;    // resolved to `version` through the config's version_labels
  std::string verb;     // "predict", "metadata", or "" (status)
};

StatusOr<TfTarget> ParseTarget(std::vector<std::string_view> parts) {
  // parts[0] == "v1", parts[1] == "models"
  TfTarget target;
  // A verb rides on the last segment: ".../m:predict".
  std::string_view& last = parts.back();
  if (size_t colon = last.rfind(':'); colon != std::string_view::npos && parts.size() >= 3) {
    target.verb = std::string(last.substr(colon + 1));
    last = last.substr(0, colon);
    if (target.verb != "predict") {
      return Status::NotFound("':" + target.verb + "' is not served; inferd answers ':predict' (classify and regress need tf.Example signatures)");
    }
  }
  if (parts.size() < 3 || parts[2].empty()) return Status::NotFound("missing model name");
  target.name = std::string(parts[2]);
  size_t next = 3;
  if (parts.size() >= next + 2 && (parts[next] == "versions" || parts[next] == "labels")) {
    if (parts[next] == "versions") {
      ASSIGN_OR_RETURN(target.version, ParseModelVersion(parts[next + 1]));
    } else {
      target.label = std::string(parts[next + 1]);
    }
    next += 2;
  }
  if (parts.size() == next + 1 && parts[next] == "metadata" && target.verb.empty()) {
    target.verb = "metadata";
    ++next;
  }
  if (parts.size() != next) return Status::NotFound("unknown path");
  return target;
}

const char* TfDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return "DT_BOOL";
    case DataType::kUint8: return "DT_UINT8";
    case DataType::kUint16: return "DT_UINT16";
    case DataType::kUint32: return "DT_UINT32";
    case DataType::kUint64: return "DT_UINT64";
    case DataType::kInt8: return "DT_INT8";
    case DataType::kInt16: return "DT_INT16";
    case DataType::kInt32: return "DT_INT32";
    case DataType::kInt64: return "DT_INT64";
    case DataType::kFp16: return "DT_HALF";
    case DataType::kBf16: return "DT_BFLOAT16";
    case DataType::kFp32: return "DT_FLOAT";
    case DataType::kFp64: return "DT_DOUBLE";
    case DataType::kBytes: return "DT_STRING";
    case DataType::kInvalid: break;
  }
  return "DT_INVALID";
}

template <typename Tensors>
void WriteSignatureTensors(const Tensors& tensors, bool batched, JsonWriter& w) {
  w.StartObject();
  for (const auto& tensor : tensors) {
    w.Key(tensor.name().c_str());
    w.StartObject();
    w.Key("dtype");
    w.String(TfDataType(DataTypeFromConfig(tensor.data_type())));
    w.Key("tensor_shape");
    w.StartObject();
    w.Key("dim");
    w.StartArray();
    auto dim = [&](int64_t size) {
      w.StartObject();
      w.Key("size");
      w.String(std::to_string(size).c_str());
      w.Key("name");
      w.String("");
      w.EndObject();
    };
    if (batched) dim(-1);
    for (int64_t d : tensor.dims()) dim(d);
    w.EndArray();
    w.Key("unknown_rank");
    w.Bool(false);
    w.EndObject();
    w.Key("name");
    w.String(tensor.name().c_str());
    w.EndObject();
  }
  w.EndObject();
}

// GET /v1/models/M[/versions/V]/metadata: the predict signature, TF Serving's shape.
std::string MetadataJson(const ModelView& model) {
  const ModelConfig& config = model.config();
  const bool batched = config.max_batch_size() > 0;
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model_spec");
  w.StartObject();
  w.Key("name");
  w.String(config.name().c_str());
  w.Key("signature_name");
  w.String("");
  w.Key("version");
  w.String(std::to_string(model.version()).c_str());
  w.EndObject();
  w.Key("metadata");
  w.StartObject();
  w.Key("signature_def");
  w.StartObject();
  w.Key("signature_def");
  w.StartObject();
  w.Key("serving_default");
  w.StartObject();
  w.Key("inputs");
  WriteSignatureTensors(config.input(), batched, w);
  w.Key("outputs");
  WriteSignatureTensors(config.output(), batched, w);
  w.Key("method_name");
  w.String("tensorflow/serving/predict");
  w.EndObject();
  w.EndObject();
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

struct VersionStatus {
  int64_t version;
  const char* state;
  std::string error_code, message;
};

std::string StatusJson(const std::vector<VersionStatus>& versions) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model_version_status");
  w.StartArray();
  for (const VersionStatus& v : versions) {
    w.StartObject();
    w.Key("version");
    w.String(std::to_string(v.version).c_str());
    w.Key("state");
    w.String(v.state);
    w.Key("status");
    w.StartObject();
    w.Key("error_code");
    w.String(v.error_code.c_str());
    w.Key("error_message");
    w.String(v.message.c_str());
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

class TfServingRoutes {
 public:
  explicit TfServingRoutes(InferenceServer* server) : server_(server) {}

  void Handle(HttpRequest request, Responder respond) {
    auto parts = SplitPath(request.path);
    if (parts.size() < 3 || parts[0] != "v1" || parts[1] != "models") return respond(Error(404, "unknown path " + request.path));
    auto target = ParseTarget(parts);
    if (!target.ok()) return respond(Error(target.status()));
    if (!target->label.empty()) {
      if (Status status = ResolveLabel(&*target); !status.ok()) return respond(Error(status));
    }
    if (target->verb == "predict") {
      if (request.method != HttpMethod::kPost) return respond(MethodNotAllowed("POST"));
      return Predict(std::move(request), *target, std::move(respond));
    }
    if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
    if (target->verb == "metadata") {
      auto model = server_->FindModel(target->name, target->version);
      if (!model.ok()) return respond(Error(model.status()));
      return respond(Json(200, MetadataJson(*model)));
    }
    respond(ModelStatus(*target));
  }

 private:
  Status ResolveLabel(TfTarget* target) {
    ASSIGN_OR_RETURN(target->version, server_->VersionForLabel(target->name, target->label));
    return Status::Ok();
  }

  // READY -> AVAILABLE; a version that failed to load -> END with its error (TF Serving's state
  // for a version that is not served). Loads run start to finish on the lifecycle thread before
  // a version is listed, so LOADING is never seen. From memory: probes call this too.
  HttpResponse ModelStatus(const TfTarget& target) {
    std::vector<VersionStatus> versions;
    std::string model_error;
    const std::vector<IndexEntry> entries = server_->ModelEntries(target.name);
    const bool known = !entries.empty();
    for (const IndexEntry& entry : entries) {
      if (entry.version == 0) {
        model_error = entry.reason;
        continue;
      }
      if (target.version != 0 && entry.version != target.version) continue;
      if (entry.state == ModelState::kReady) {
        versions.push_back({entry.version, "AVAILABLE", "OK", ""});
      } else {
        versions.push_back({entry.version, "END", "UNKNOWN", entry.reason});
      }
    }
    if (!known) return Error(404, "unknown model '" + target.name + "'");
    if (versions.empty()) {
      std::string message = target.version != 0 ? "model '" + target.name + "' has no version " + std::to_string(target.version)
                                                 : "model '" + target.name + "' has no loaded version";
      if (!model_error.empty()) message += ": " + model_error;
      return Error(404, message);
    }
    return Json(200, StatusJson(versions));
  }

  void Predict(HttpRequest request, const TfTarget& target, Responder respond) {
    auto model = server_->FindModel(target.name, target.version);
    if (!model.ok()) return respond(Error(model.status()));
    std::vector<TfTensorSpec> inputs;
    for (const auto& input : model->config().input()) inputs.push_back({input.name(), DataTypeFromConfig(input.data_type())});
    auto parsed = ParseTfPredictRequest(*request.body, inputs);
    if (!parsed.ok()) {
      spdlog::debug("rejected request to {}: {}", request.path, parsed.status().message());
      return respond(Error(parsed.status()));
    }
    parsed->request->model_name = target.name;
    parsed->request->model_version = model->version();
    const TfFormat format = parsed->format;
    const int64_t instances = parsed->instances;
    server_->InferAsync(std::move(parsed->request),
                        [respond = std::move(respond), format, instances](StatusOr<InferResponse> result) {
                          if (!result.ok()) return respond(Error(result.status()));
                          auto body = EncodeTfPredictResponse(*result, format, instances);
                          respond(body.ok() ? Json(200, std::move(*body)) : Error(body.status()));
                        });
  }

  InferenceServer* server_;
};

}  // namespace

HttpHandler MakeTfServingHandler(InferenceServer* server) {
  auto routes = std::make_shared<TfServingRoutes>(server);
  return [routes](HttpRequest request, Responder respond) { routes->Handle(std::move(request), std::move(respond)); };
}

HttpHandler RouteByApi(HttpHandler kserve, HttpHandler tfserving) {
  return [kserve = std::move(kserve), tfserving = std::move(tfserving)](HttpRequest request, Responder respond) {
    if (request.path.rfind("/v1/", 0) == 0) return tfserving(std::move(request), std::move(respond));
    kserve(std::move(request), std::move(respond));
  };
}

}  // namespace inferd
