// The HTTP transport: KServe v2 REST on keep-alive HTTP/1.1 connections (Boost.Beast, blocking
// sockets), the binary tensor extension by default. Connections are pooled, one per concurrent
// caller; InferAsync feeds a bounded queue served by `async_connections` threads.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <thread>

#include "client/transports.h"
#include "common/mutex.h"
#include "common/string_pool.h"
#include "frontends/http/kserve_codec.h"
#include "frontends/http/lifecycle_codec.h"
#include "frontends/http/pooled_string_body.h"

namespace inferd::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint64_t kMaxResponseBytes = uint64_t{2} << 30;
constexpr size_t kMaxAsyncQueue = 4096;

struct HttpReply {
  unsigned status = 0;
  std::string body;
  std::optional<size_t> json_length;  // Inference-Header-Content-Length
};

StatusCode CodeForHttpStatus(unsigned status) {
  switch (status) {
    case 400: return StatusCode::kInvalidArgument;
    case 404: return StatusCode::kNotFound;
    case 409: return StatusCode::kAlreadyExists;
    case 413: return StatusCode::kResourceExhausted;
    case 501: return StatusCode::kUnimplemented;
    case 503: return StatusCode::kUnavailable;
    case 504: return StatusCode::kDeadlineExceeded;
    default: return StatusCode::kInternal;
  }
}

// A non-200 answer as the Status the server meant, with its {"error": ...} message.
Status ErrorFromReply(const HttpReply& reply) {
  rapidjson::Document doc;
  doc.Parse(reply.body.data(), reply.body.size());
  std::string message = "HTTP " + std::to_string(reply.status);
  if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("error") && doc["error"].IsString())
    message = doc["error"].GetString();
  return Status(CodeForHttpStatus(reply.status), message);
}

// One keep-alive connection, used by one caller at a time. Operations are Beast's async ones run
// to completion on the caller's thread (io_context::run), which is how a blocking call gets a
// timeout: the stream's expiry cancels them.
class HttpConnection {
 public:
  HttpConnection(std::string host, std::string port, std::chrono::milliseconds timeout)
      : host_(std::move(host)), port_(std::move(port)), timeout_(timeout) {
    // Beast reads at most the buffer's free capacity at a time: room for its largest read (64 KiB)
    // keeps a large answer from arriving in hundreds of small reads.
    buffer_.reserve(64 * 1024);
  }

  StatusOr<HttpReply> Send(http::verb method, const std::string& target, const std::string& body,
                           std::optional<size_t> json_length) {
    const bool reused = stream_.socket().is_open();
    auto reply = SendOnce(method, target, body, json_length);
    // A kept-alive connection the server closed in the meantime fails before any answer: the
    // request never reached it, so sending it again on a new connection is safe. A timeout is
    // not retried: the server may be working on it.
    if (!reply.ok() && reused && reply.status().code() == StatusCode::kUnavailable)
      reply = SendOnce(method, target, body, json_length);
    return reply;
  }

 private:
  void ArmTimer() {
    if (timeout_.count() > 0) stream_.expires_after(timeout_);
    else stream_.expires_never();
  }

  // Runs the operations started on io_ until they are all done.
  void RunToCompletion() {
    io_.restart();
    io_.run();
  }

  Status Failed(const beast::error_code& error, const char* what) {
    stream_.close();
    buffer_.clear();
    if (error == beast::error::timeout)
      return Status::DeadlineExceeded(std::string("no answer from ") + host_ + ":" + port_ + " in time (" + what + ")");
    return Status::Unavailable(std::string(what) + " " + host_ + ":" + port_ + " failed: " + error.message());
  }

  Status Connect() {
    beast::error_code error;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(host_, port_, error);
    if (error) return Failed(error, "resolving");
    ArmTimer();
    stream_.async_connect(endpoints, [&](const beast::error_code& e, const tcp::endpoint&) { error = e; });
    RunToCompletion();
    if (error) return Failed(error, "connecting to");
    stream_.socket().set_option(tcp::no_delay(true));
    return Status::Ok();
  }

  StatusOr<HttpReply> SendOnce(http::verb method, const std::string& target, const std::string& body,
                               std::optional<size_t> json_length) {
    if (!stream_.socket().is_open()) RETURN_IF_ERROR(Connect());
    // The caller's body is sent from where it is (a span), not copied into the request.
    http::request<http::span_body<const char>> request{method, target, 11};
    request.set(http::field::host, host_);
    request.keep_alive(true);
    if (method == http::verb::post) {
      request.set(http::field::content_type, json_length ? "application/octet-stream" : "application/json");
      if (json_length) request.set("Inference-Header-Content-Length", std::to_string(*json_length));
      request.body() = http::span_body<const char>::value_type(body.data(), body.size());
      request.prepare_payload();
    }
    http::response_parser<PooledStringBody> parser;
    parser.body_limit(kMaxResponseBytes);
    beast::error_code error;
    ArmTimer();
    http::async_write(stream_, request, [&](const beast::error_code& e, size_t) {
      error = e;
      if (!e) http::async_read(stream_, buffer_, parser, [&](const beast::error_code& r, size_t) { error = r; });
    });
    RunToCompletion();
    if (error) return Failed(error, "HTTP exchange with");
    auto& response = parser.get();
    HttpReply reply{.status = response.result_int(), .body = std::move(response.body())};
    if (auto it = response.find("Inference-Header-Content-Length"); it != response.end())
      reply.json_length = std::strtoull(std::string(it->value()).c_str(), nullptr, 10);
    if (!response.keep_alive()) stream_.close();
    return reply;
  }

  const std::string host_, port_;
  const std::chrono::milliseconds timeout_;
  asio::io_context io_{1};
  beast::tcp_stream stream_{io_};
  beast::flat_buffer buffer_;
};

// "/v2/systemsharedmemory/region/NAME", or "/v2/systemsharedmemory" for every region.
std::string SharedMemoryPath(const std::string& name) {
  return name.empty() ? "/v2/systemsharedmemory" : "/v2/systemsharedmemory/region/" + name;
}

std::string ModelPath(const std::string& model, int64_t version) {
  return "/v2/models/" + model + (version > 0 ? "/versions/" + std::to_string(version) : "");
}

std::vector<std::string> StringArray(const rapidjson::Value& object, const char* key) {
  std::vector<std::string> values;
  if (object.HasMember(key) && object[key].IsArray())
    for (const auto& value : object[key].GetArray())
      if (value.IsString()) values.emplace_back(value.GetString());
  return values;
}

std::string StringMember(const rapidjson::Value& object, const char* key) {
  return object.HasMember(key) && object[key].IsString() ? object[key].GetString() : "";
}

uint64_t UintMember(const rapidjson::Value& object, const char* key) {
  return object.HasMember(key) && object[key].IsUint64() ? object[key].GetUint64() : 0;
}

double DoubleMember(const rapidjson::Value& object, const char* key) {
  return object.HasMember(key) && object[key].IsNumber() ? object[key].GetDouble() : 0;
}

int64_t IntMember(const rapidjson::Value& object, const char* key) {
  return object.HasMember(key) && object[key].IsInt64() ? object[key].GetInt64() : 0;
}

TrafficInfo TrafficFrom(const rapidjson::Value& doc) {
  TrafficInfo info;
  if (doc.HasMember("split") && doc["split"].IsObject()) {
    for (const auto& [version, weight] : doc["split"].GetObject()) {
      if (weight.IsUint()) info.split[std::atoll(version.GetString())] = weight.GetUint();
    }
  }
  if (doc.HasMember("labels") && doc["labels"].IsObject()) {
    for (const auto& [label, version] : doc["labels"].GetObject()) {
      if (version.IsInt64()) info.labels[label.GetString()] = version.GetInt64();
    }
  }
  return info;
}

StatusOr<RolloutInfo> RolloutFrom(const rapidjson::Value& doc) {
  RolloutInfo info;
  ASSIGN_OR_RETURN(info.plan, ReadRolloutPlanFields(doc));
  info.state = StringMember(doc, "state");
  info.step = static_cast<uint32_t>(UintMember(doc, "step"));
  info.percent = static_cast<uint32_t>(UintMember(doc, "percent"));
  info.in_step_seconds = DoubleMember(doc, "in_step_seconds");
  info.reason = StringMember(doc, "reason");
  if (doc.HasMember("observed") && doc["observed"].IsObject()) {
    info.requests = UintMember(doc["observed"], "requests");
    info.errors = UintMember(doc["observed"], "errors");
    info.p99_ms = DoubleMember(doc["observed"], "p99_ms");
  }
  if (doc.HasMember("baseline_observed") && doc["baseline_observed"].IsObject()) {
    info.baseline_requests = UintMember(doc["baseline_observed"], "requests");
    info.baseline_p99_ms = DoubleMember(doc["baseline_observed"], "p99_ms");
  }
  if (doc.HasMember("mirrored") && doc["mirrored"].IsObject()) {
    info.mirrored = {UintMember(doc["mirrored"], "compared"), UintMember(doc["mirrored"], "agreed"),
                     UintMember(doc["mirrored"], "skipped")};
  }
  info.baseline_retired = doc.HasMember("baseline_retired") && doc["baseline_retired"].IsBool() &&
                          doc["baseline_retired"].GetBool();
  info.retire_in_seconds = IntMember(doc, "retire_in_seconds");
  return info;
}

std::vector<TensorMetadata> TensorList(const rapidjson::Value& object, const char* key) {
  std::vector<TensorMetadata> tensors;
  if (!object.HasMember(key) || !object[key].IsArray()) return tensors;
  for (const auto& tensor : object[key].GetArray()) {
    TensorMetadata metadata{StringMember(tensor, "name"), StringMember(tensor, "datatype"), {}};
    if (tensor.HasMember("shape") && tensor["shape"].IsArray())
      for (const auto& dim : tensor["shape"].GetArray())
        if (dim.IsInt64()) metadata.shape.push_back(dim.GetInt64());
    tensors.push_back(std::move(metadata));
  }
  return tensors;
}

class HttpClient final : public Client {
 public:
  HttpClient(const ClientOptions& options, std::string host, std::string port)
      : options_(options), host_(std::move(host)), port_(std::move(port)) {}

  ~HttpClient() override {
    {
      MutexLock lock(&async_mu_);
      stopping_ = true;
    }
    async_cv_.NotifyAll();
    for (auto& worker : workers_) worker.join();  // each finishes the queue first
  }

  StatusOr<bool> ServerLive() override { return Flag("/v2/health/live"); }
  StatusOr<bool> ServerReady() override { return Flag("/v2/health/ready"); }
  StatusOr<bool> ModelReady(const std::string& model, int64_t version) override {
    return Flag(ModelPath(model, version) + "/ready");
  }

  StatusOr<ModelMetadata> GetModelMetadata(const std::string& model, int64_t version) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, GetJson(http::verb::get, ModelPath(model, version)));
    return ModelMetadata{.name = StringMember(doc, "name"),
                         .versions = StringArray(doc, "versions"),
                         .platform = StringMember(doc, "platform"),
                         .inputs = TensorList(doc, "inputs"),
                         .outputs = TensorList(doc, "outputs")};
  }

  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(const std::string& model, int64_t version) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc,
                     GetJson(http::verb::get, model.empty() ? "/v2/models/stats" : ModelPath(model, version) + "/stats"));
    std::vector<ModelStatistics> all;
    if (!doc.IsObject() || !doc.HasMember("model_stats") || !doc["model_stats"].IsArray())
      return Status::Internal("statistics answer has no model_stats array");
    for (const auto& stats : doc["model_stats"].GetArray()) {
      ModelStatistics entry{.name = StringMember(stats, "name"),
                            .version = StringMember(stats, "version"),
                            .inference_count = UintMember(stats, "inference_count"),
                            .execution_count = UintMember(stats, "execution_count")};
      if (stats.HasMember("inference_stats") && stats["inference_stats"].IsObject()) {
        const auto& inference = stats["inference_stats"];
        auto duration = [&](const char* key, uint64_t* count, uint64_t* ns) {
          if (!inference.HasMember(key) || !inference[key].IsObject()) return;
          if (count) *count = UintMember(inference[key], "count");
          *ns = UintMember(inference[key], "ns");
        };
        duration("success", &entry.success_count, &entry.success_ns);
        duration("queue", &entry.queue_count, &entry.queue_ns);
        duration("compute_input", nullptr, &entry.compute_input_ns);
        duration("compute_infer", nullptr, &entry.compute_infer_ns);
        duration("compute_output", nullptr, &entry.compute_output_ns);
      }
      all.push_back(std::move(entry));
    }
    return all;
  }

  StatusOr<std::vector<RepositoryEntry>> GetRepositoryIndex() override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, GetJson(http::verb::post, "/v2/repository/index"));
    if (!doc.IsArray()) return Status::Internal("repository index answer is not an array");
    std::vector<RepositoryEntry> entries;
    for (const auto& model : doc.GetArray()) {
      auto seconds = [&](const char* key) { return model.HasMember(key) && model[key].IsNumber() ? model[key].GetDouble() : -1; };
      entries.push_back({StringMember(model, "name"), StringMember(model, "version"), StringMember(model, "state"),
                         StringMember(model, "reason"), seconds("load_seconds"), seconds("warmup_seconds"),
                         seconds("first_request_seconds")});
    }
    return entries;
  }

  StatusOr<std::string> GetModelConfigJson(const std::string& model) override {
    ASSIGN_OR_RETURN(HttpReply reply, Exchange(http::verb::get, ModelPath(model, 0) + "/config", "", std::nullopt));
    if (reply.status != 200) return ErrorFromReply(reply);
    return std::move(reply.body);
  }
  using Client::LoadModel;
  Status LoadModel(const std::string& model, const std::string& config_json) override {
    std::string body;
    if (!config_json.empty()) {
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
      w.StartObject();
      w.Key("parameters");
      w.StartObject();
      w.Key("config");
      w.String(config_json.data(), static_cast<rapidjson::SizeType>(config_json.size()));
      w.EndObject();
      w.EndObject();
      body.assign(buffer.GetString(), buffer.GetSize());
    }
    return PostJson("/v2/repository/models/" + model + "/load", body).status();
  }
  Status UnloadModel(const std::string& model) override {
    return GetJson(http::verb::post, "/v2/repository/models/" + model + "/unload").status();
  }

  Status RegisterSystemSharedMemory(const std::string& name, const std::string& key, uint64_t offset,
                                    uint64_t byte_size) override {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartObject();
    w.Key("key");
    w.String(key.c_str(), static_cast<rapidjson::SizeType>(key.size()));
    w.Key("offset");
    w.Uint64(offset);
    w.Key("byte_size");
    w.Uint64(byte_size);
    w.EndObject();
    return PostJson(SharedMemoryPath(name) + "/register", std::string(buffer.GetString(), buffer.GetSize())).status();
  }

  Status UnregisterSystemSharedMemory(const std::string& name) override {
    return GetJson(http::verb::post, SharedMemoryPath(name) + "/unregister").status();
  }

  StatusOr<std::vector<SharedMemoryRegionInfo>> GetSystemSharedMemoryStatus(const std::string& name) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, GetJson(http::verb::get, SharedMemoryPath(name) + "/status"));
    if (!doc.IsArray()) return Status::Internal("shared memory status answer is not an array");
    std::vector<SharedMemoryRegionInfo> regions;
    for (const auto& region : doc.GetArray()) {
      regions.push_back({StringMember(region, "name"), StringMember(region, "key"), UintMember(region, "offset"),
                         UintMember(region, "byte_size")});
    }
    return regions;
  }

  StatusOr<TrafficInfo> GetTraffic(const std::string& model) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, GetJson(http::verb::get, ModelPath(model, 0) + "/traffic"));
    return TrafficFrom(doc);
  }

  StatusOr<TrafficInfo> SetTraffic(const std::string& model, const TrafficChange& change) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc,
                     PostJson(ModelPath(model, 0) + "/traffic", EncodeTrafficRequest(change)));
    return TrafficFrom(doc);
  }

  StatusOr<RolloutInfo> StartRollout(const std::string& model, const RolloutPlan& plan) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, PostJson(ModelPath(model, 0) + "/rollout", EncodeRolloutPlan(plan)));
    return RolloutFrom(doc);
  }

  StatusOr<RolloutInfo> GetRollout(const std::string& model) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, GetJson(http::verb::get, ModelPath(model, 0) + "/rollout"));
    return RolloutFrom(doc);
  }

  StatusOr<RolloutInfo> RollbackRollout(const std::string& model) override {
    ASSIGN_OR_RETURN(rapidjson::Document doc, PostJson(ModelPath(model, 0) + "/rollout", R"({"action":"rollback"})"));
    return RolloutFrom(doc);
  }

  StatusOr<InferResponse> Infer(const InferRequest& request) override {
    EncodedRequest encoded = EncodeInferRequest(request, options_.binary);
    ASSIGN_OR_RETURN(HttpReply reply, Exchange(http::verb::post, ModelPath(request.model_name, request.model_version) +
                                                                     "/infer",
                                               encoded.body, encoded.json_length));
    BodyStringPool().Give(std::move(encoded.body));
    if (reply.status != 200) return ErrorFromReply(reply);
    return ParseInferResponse(BodyStringPool().Share(std::move(reply.body)), reply.json_length);
  }

  void InferAsync(const InferRequest& request, InferCallback done) override {
    {
      MutexLock lock(&async_mu_);
      if (async_queue_.size() >= kMaxAsyncQueue)
        return done(Status::Unavailable("client async queue is full (" + std::to_string(kMaxAsyncQueue) + ")"));
      async_queue_.push_back({request, std::move(done)});
      if (workers_.size() < static_cast<size_t>(std::max(1, options_.async_connections)) &&
          idle_workers_ == 0) {
        workers_.emplace_back([this] { ServeAsyncQueue(); });
      }
    }
    async_cv_.NotifyOne();
  }

 private:
  struct AsyncCall {
    InferRequest request;
    InferCallback done;
  };

  void ServeAsyncQueue() {
    while (true) {
      AsyncCall call;
      {
        MutexLock lock(&async_mu_);
        ++idle_workers_;
        while (async_queue_.empty() && !stopping_) async_cv_.Wait(lock);
        --idle_workers_;
        if (async_queue_.empty()) return;
        call = std::move(async_queue_.front());
        async_queue_.pop_front();
      }
      call.done(Infer(call.request));
    }
  }

  StatusOr<bool> Flag(const std::string& path) {
    ASSIGN_OR_RETURN(HttpReply reply, Exchange(http::verb::get, path, "", std::nullopt));
    if (reply.status == 200) return true;
    if (reply.status == 503) return false;
    return ErrorFromReply(reply);
  }

  StatusOr<rapidjson::Document> GetJson(http::verb method, const std::string& path, const std::string& body = "") {
    ASSIGN_OR_RETURN(HttpReply reply, Exchange(method, path, body, std::nullopt));
    if (reply.status != 200) return ErrorFromReply(reply);
    rapidjson::Document doc;
    doc.Parse(reply.body.data(), reply.body.size());
    if (doc.HasParseError()) return Status::Internal("the server's answer to " + path + " is not JSON");
    return doc;
  }

  StatusOr<rapidjson::Document> PostJson(const std::string& path, const std::string& body) {
    return GetJson(http::verb::post, path, body);
  }

  // Borrows a pooled connection (or opens one) for the exchange and returns it after.
  StatusOr<HttpReply> Exchange(http::verb method, const std::string& path, const std::string& body,
                               std::optional<size_t> json_length) {
    std::unique_ptr<HttpConnection> connection;
    {
      MutexLock lock(&pool_mu_);
      if (!pool_.empty()) {
        connection = std::move(pool_.back());
        pool_.pop_back();
      }
    }
    if (!connection) connection = std::make_unique<HttpConnection>(host_, port_, options_.timeout);
    auto reply = connection->Send(method, path, body, json_length);
    MutexLock lock(&pool_mu_);
    pool_.push_back(std::move(connection));
    return reply;
  }

  const ClientOptions options_;
  const std::string host_, port_;

  Mutex pool_mu_;
  std::vector<std::unique_ptr<HttpConnection>> pool_ GUARDED_BY(pool_mu_);

  Mutex async_mu_;
  CondVar async_cv_;
  std::deque<AsyncCall> async_queue_ GUARDED_BY(async_mu_);
  std::vector<std::thread> workers_ GUARDED_BY(async_mu_);
  int idle_workers_ GUARDED_BY(async_mu_) = 0;
  bool stopping_ GUARDED_BY(async_mu_) = false;
};

}  // namespace

std::string HostPort(const std::string& url) {
  std::string rest = url;
  for (const char* scheme : {"http://", "grpc://"})
    if (rest.rfind(scheme, 0) == 0) rest = rest.substr(std::strlen(scheme));
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  return rest;
}

StatusOr<std::unique_ptr<Client>> MakeHttpClient(const ClientOptions& options) {
  const std::string host_port = HostPort(options.url);
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    return Status::InvalidArgument("url '" + options.url + "' must be host:port");
  return std::unique_ptr<Client>(
      std::make_unique<HttpClient>(options, host_port.substr(0, colon), host_port.substr(colon + 1)));
}

StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options) {
  if (options.protocol == Protocol::kGrpc) {
    if (HostPort(options.url).find(':') == std::string::npos)
      return Status::InvalidArgument("url '" + options.url + "' must be host:port");
    return MakeGrpcClient(options);
  }
  return MakeHttpClient(options);
}

}  // namespace inferd::client
