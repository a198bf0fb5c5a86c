#include "frontends/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <deque>

#include "common/mutex.h"
#include "core/server_info.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_status.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "inferd_version.h"

namespace inferd {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

// A stream may have this many requests parsed and not yet answered; beyond it the stream stops
// reading until answers go out, so one client cannot pile up unbounded work through one stream
// (the model's queue limit still applies to each request).
constexpr int kMaxInflightPerStream = 64;

grpc::Status Error(const Status& status) { return ToGrpcStatus(status); }

// An empty version string means "the server picks".
StatusOr<int64_t> VersionFrom(const std::string& text) {
  if (text.empty()) return int64_t{0};
  return ParseModelVersion(text);
}

// The time the client has left, carried into the queue so the request is dropped unexecuted once
// nobody waits for it. DEADLINE_EXCEEDED when it has already passed.
Status ApplyClientDeadline(const grpc::CallbackServerContext& context, InferRequest* request) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Status::Ok();
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::system_clock::now());
  if (left.count() <= 0) return Status::DeadlineExceeded("the client's deadline passed before the request was queued");
  request->client_timeout_us = static_cast<uint64_t>(left.count());
  return Status::Ok();
}

// gRPC owns the request message only until the call finishes, while parsed tensors alias its raw
// contents and may outlive that (a batch holds them): move the contents into a message we own.
// Swap of two heap messages exchanges pointers; nothing is copied. The message is ours to change:
// gRPC handed it to this one call and reads it no more.
std::shared_ptr<const ModelInferRequest> TakeMessage(const ModelInferRequest* message) {
  auto owned = std::make_shared<ModelInferRequest>();
  owned->Swap(const_cast<ModelInferRequest*>(message));
  return owned;
}

template <typename TensorList, typename Metadata>
void DescribeTensors(const TensorList& tensors, bool batching, Metadata* out) {
  for (const auto& tensor : tensors) {
    auto* entry = out->Add();
    entry->set_name(tensor.name());
    entry->set_datatype(std::string(DataTypeName(DataTypeFromConfig(tensor.data_type()))));
    if (batching) entry->add_shape(-1);
    for (int64_t dim : tensor.dims()) entry->add_shape(dim);
  }
}

void CopyDuration(const DurationStat& from, inference::StatisticDuration* to) {
  to->set_count(from.count.load());
  to->set_ns(from.ns.load());
}

void DescribeStats(const ModelVersion& model, inference::ModelStatistics* out) {
  const ModelStats& stats = model.stats();
  out->set_name(model.name());
  out->set_version(std::to_string(model.version()));
  out->set_last_inference(stats.last_inference_ms.load());
  out->set_inference_count(stats.inference_count.load());
  out->set_execution_count(stats.execution_count.load());
  auto* inference = out->mutable_inference_stats();
  CopyDuration(stats.success, inference->mutable_success());
  CopyDuration(stats.fail, inference->mutable_fail());
  CopyDuration(stats.queue, inference->mutable_queue());
  CopyDuration(stats.compute_input, inference->mutable_compute_input());
  CopyDuration(stats.compute_infer, inference->mutable_compute_infer());
  CopyDuration(stats.compute_output, inference->mutable_compute_output());
}

// ModelStreamInfer: reads, runs and answers requests concurrently. Answers are written one at a
// time in completion order. The reactor deletes itself in OnDone, which gRPC calls only after
// Finish, and Finish comes only once every read has ended and every request is answered, so no
// inference callback can reach a deleted reactor.
class StreamInferReactor final : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  StreamInferReactor(InferenceServer* server, grpc::CallbackServerContext* context)
      : server_(server), context_(context) {
    Pump();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call is gone
      {
        MutexLock lock(&mu_);
        reading_ = false;
        reads_done_ = true;
      }
      return Pump();
    }
    std::shared_ptr<const ModelInferRequest> message = TakeMessage(incoming_.get());
    {
      MutexLock lock(&mu_);
      reading_ = false;
      ++inflight_;
    }
    Run(std::move(message));
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) broken_ = true;  // the client is gone: later answers have nowhere to go
    }
    Pump();
  }

  void OnDone() override { delete this; }

 private:
  void Run(std::shared_ptr<const ModelInferRequest> message) {
    auto parsed = ParseModelInferRequest(message);
    Status status = parsed.ok() ? ApplyClientDeadline(*context_, parsed->get()) : parsed.status();
    if (!status.ok()) return Answer(ErrorResponse(*message, status));
    // The message stays alive for the error answer (the request's tensors point into it anyway).
    server_->InferAsync(std::move(parsed).value(), [this, message](StatusOr<InferResponse> result) {
      if (!result.ok()) return Answer(ErrorResponse(*message, result.status()));
      auto response = std::make_unique<ModelStreamInferResponse>();
      EncodeModelInferResponse(*result, response->mutable_infer_response());
      Answer(std::move(response));
    });
  }

  static std::unique_ptr<ModelStreamInferResponse> ErrorResponse(const ModelInferRequest& request,
                                                                 const Status& error) {
    auto response = std::make_unique<ModelStreamInferResponse>();
    response->set_error_message(error.message());
    response->mutable_infer_response()->set_id(request.id());
    response->mutable_infer_response()->set_model_name(request.model_name());
    response->mutable_infer_response()->set_model_version(request.model_version());
    return response;
  }

  void Answer(std::unique_ptr<ModelStreamInferResponse> response) {
    {
      MutexLock lock(&mu_);
      --inflight_;
      if (!broken_) writes_.push_back(std::move(response));
    }
    Pump();
  }

  // Decides under the lock what to start, then starts it outside: gRPC may run a reaction on this
  // thread, and reactions take the lock. The flags make each start happen on one thread only.
  void Pump() {
    bool write = false, read = false, finish = false, cancelled = false;
    {
      MutexLock lock(&mu_);
      if (broken_) writes_.clear();
      if (!writing_ && !writes_.empty()) {
        current_write_ = std::move(writes_.front());
        writes_.pop_front();
        writing_ = write = true;
      }
      if (!reading_ && !reads_done_ && inflight_ < kMaxInflightPerStream) {
        incoming_ = std::make_unique<ModelInferRequest>();
        reading_ = read = true;
      }
      if (!finished_ && reads_done_ && inflight_ == 0 && !writing_ && writes_.empty()) {
        finished_ = finish = true;
        cancelled = broken_;
      }
    }
    if (write) StartWrite(current_write_.get());
    if (read) StartRead(incoming_.get());
    if (finish) Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);
  }

  InferenceServer* const server_;
  grpc::CallbackServerContext* const context_;
  // Touched only by the one read (or write) in progress, which the flags below serialise.
  std::unique_ptr<ModelInferRequest> incoming_;
  std::unique_ptr<ModelStreamInferResponse> current_write_;

  Mutex mu_;
  std::deque<std::unique_ptr<ModelStreamInferResponse>> writes_ GUARDED_BY(mu_);
  int inflight_ GUARDED_BY(mu_) = 0;
  bool reading_ GUARDED_BY(mu_) = false;
  bool writing_ GUARDED_BY(mu_) = false;
  bool reads_done_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
};

}  // namespace

class GrpcServer::InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit InferenceService(InferenceServer* server) : server_(server) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(server_->IsLive());
    return Done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    response->set_ready(server_->IsReady());
    return Done(context, grpc::Status::OK);
  }

  // Ready: loaded and serving. Known to the repository but not loaded: ready false. Unknown:
  // NOT_FOUND, as over HTTP.
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    auto version = VersionFrom(request->version());
    if (!version.ok()) return Done(context, Error(version.status()));
    auto model = server_->FindModel(request->name(), *version);
    if (model.ok()) {
      response->set_ready(true);
      return Done(context, grpc::Status::OK);
    }
    for (const auto& entry : server_->RepositoryIndex()) {
      if (entry.name == request->name() && (*version == 0 || entry.version == *version || entry.version == 0)) {
        response->set_ready(false);
        return Done(context, grpc::Status::OK);
      }
    }
    return Done(context, Error(model.status()));
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    response->set_name(std::string(kServerName));
    response->set_version(kInferdVersion);
    for (std::string_view extension : ServerExtensions()) response->add_extensions(std::string(extension));
    return Done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    auto model = Find(request->name(), request->version());
    if (!model.ok()) return Done(context, Error(model.status()));
    const inferd::ModelConfig& config = (*model)->config();
    response->set_name(config.name());
    for (const auto& loaded : server_->LoadedVersions(config.name()))
      response->add_versions(std::to_string(loaded->version()));
    response->set_platform(ReportedPlatform(config));
    const bool batching = config.max_batch_size() > 0;
    DescribeTensors(config.input(), batching, response->mutable_inputs());
    DescribeTensors(config.output(), batching, response->mutable_outputs());
    return Done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const ModelInferRequest* request,
                                       ModelInferResponse* response) override {
    auto parsed = ParseModelInferRequest(TakeMessage(request));
    if (!parsed.ok()) return Done(context, Error(parsed.status()));
    if (Status status = ApplyClientDeadline(*context, parsed->get()); !status.ok())
      return Done(context, Error(status));
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    server_->InferAsync(std::move(parsed).value(), [reactor, response](StatusOr<InferResponse> result) {
      if (!result.ok()) return reactor->Finish(Error(result.status()));
      EncodeModelInferResponse(*result, response);
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

  grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override {
    return new StreamInferReactor(server_, context);
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    auto model = Find(request->name(), request->version());
    if (!model.ok()) return Done(context, Error(model.status()));
    *response->mutable_config() = (*model)->config();
    return Done(context, grpc::Status::OK);
  }

  // No name: every loaded model. A name: its loaded versions, or the one asked for.
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    std::vector<std::shared_ptr<ModelVersion>> models;
    if (request->name().empty()) {
      models = server_->LoadedModels();
    } else {
      auto model = Find(request->name(), request->version());
      if (!model.ok()) return Done(context, Error(model.status()));
      models = request->version().empty() ? server_->LoadedVersions(request->name())
                                          : std::vector<std::shared_ptr<ModelVersion>>{*model};
    }
    for (const auto& model : models) DescribeStats(*model, response->add_model_stats());
    return Done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override {
    for (const auto& entry : server_->RepositoryIndex()) {
      if (request->ready() && entry.state != "READY") continue;
      auto* model = response->add_models();
      model->set_name(entry.name);
      if (entry.version > 0) model->set_version(std::to_string(entry.version));
      model->set_state(entry.state);
      model->set_reason(entry.reason);
    }
    return Done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                const inference::RepositoryModelLoadRequest* request,
                                                inference::RepositoryModelLoadResponse*) override {
    // Triton's "config" and "file:" overrides would load a model that is not in the repository.
    if (!request->parameters().empty()) {
      return Done(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "load parameters (config or file overrides) are not supported; "
                                        "put the model in the repository"));
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    server_->LoadModelAsync(request->model_name(), [reactor](Status status) { reactor->Finish(Error(status)); });
    return reactor;
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* context,
                                                  const inference::RepositoryModelUnloadRequest* request,
                                                  inference::RepositoryModelUnloadResponse*) override {
    // unload_dependents concerns ensembles' members; inferd has no ensembles, so it changes nothing.
    for (const auto& [key, value] : request->parameters()) {
      if (key != "unload_dependents") {
        return Done(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                          "unknown unload parameter '" + key + "'"));
      }
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    server_->UnloadModelAsync(request->model_name(), [reactor](Status status) { reactor->Finish(Error(status)); });
    return reactor;
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  StatusOr<std::shared_ptr<ModelVersion>> Find(const std::string& name, const std::string& version_text) {
    ASSIGN_OR_RETURN(int64_t version, VersionFrom(version_text));
    return server_->FindModel(name, version);
  }

  InferenceServer* const server_;
};

// grpc.health.v1: "" is the server as a whole (ready, and not draining); a model name is that
// model's newest version. An unknown name is NOT_FOUND, as the health protocol specifies.
class GrpcServer::HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(InferenceServer* server) : server_(server) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    using grpc::health::v1::HealthCheckResponse;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    bool serving = false;
    if (request->service().empty()) {
      serving = server_->IsReady();
    } else {
      const bool loaded = server_->FindModel(request->service(), 0).ok();
      bool known = loaded;
      for (const auto& entry : server_->RepositoryIndex()) known = known || entry.name == request->service();
      if (!known) {
        reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
        return reactor;
      }
      serving = loaded && !server_->draining();
    }
    response->set_status(serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  InferenceServer* const server_;
};

GrpcServer::GrpcServer(GrpcServerOptions options, InferenceServer* server)
    : options_(std::move(options)),
      inference_service_(std::make_unique<InferenceService>(server)),
      health_service_(std::make_unique<HealthService>(server)) {}

GrpcServer::~GrpcServer() { Stop(std::chrono::milliseconds(0)); }

Status GrpcServer::Start() {
  grpc::ServerBuilder builder;
  const std::string address = options_.address + ":" + std::to_string(options_.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, options_.keepalive_permit_without_calls ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, options_.http2_max_pings_without_data);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options_.http2_min_recv_ping_interval_without_data_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, options_.http2_max_ping_strikes);
  builder.RegisterService(inference_service_.get());
  builder.RegisterService(health_service_.get());
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || port_ == 0) {
    grpc_server_.reset();
    return Status::Unavailable("cannot listen for gRPC on " + address);
  }
  return Status::Ok();
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (!grpc_server_) return;
  grpc_server_->Shutdown(std::chrono::system_clock::now() + grace);
  grpc_server_->Wait();
  grpc_server_.reset();
}

}  // namespace inferd
