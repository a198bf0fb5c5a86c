#include "frontends/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <thread>
#include <type_traits>

#include "common/container_resources.h"
#include "core/server_info.h"
#include "frontends/grpc/call_queues.h"
#include "frontends/grpc/grpc_call_util.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_status.h"
#include "frontends/grpc/stream_infer_call.h"
#include "frontends/grpc/health_watch_call.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "lifecycle.grpc.pb.h"
#include "inferd_version.h"

namespace inferd {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

grpc::Status Error(const Status& status) { return ToGrpcStatus(status); }

// An empty version string means "the server picks".
StatusOr<int64_t> VersionFrom(const std::string& text) {
  if (text.empty()) return int64_t{0};
  return ParseModelVersion(text);
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

void DescribeStats(const ModelView& model, inference::ModelStatistics* out) {
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
  CopyDuration(stats.cache_hit, inference->mutable_cache_hit());
  CopyDuration(stats.cache_miss, inference->mutable_cache_miss());
}

void DescribeTraffic(const std::string& model, const ModelTraffic& traffic, lifecycle::TrafficResponse* out) {
  out->set_model_name(model);
  auto* weights = out->mutable_split()->mutable_weights();
  for (const auto& [version, weight] : traffic.split) (*weights)[version] = weight;
  auto* labels = out->mutable_labels()->mutable_labels();
  for (const auto& [label, version] : traffic.labels) (*labels)[label] = version;
}

void DescribeWindow(const StepWindow& window, lifecycle::StepWindow* out) {
  out->set_requests(window.requests);
  out->set_errors(window.errors);
  out->set_p99_ms(window.p99_seconds * 1e3);
}

grpc::Status DescribeRollout(const StatusOr<RolloutStatus>& status, lifecycle::RolloutResponse* out) {
  if (!status.ok()) return ToGrpcStatus(status.status());
  out->set_model_name(status->model);
  EncodeRolloutPlan(status->plan, out->mutable_plan());
  out->set_state(std::string(RolloutPhaseName(status->phase)));
  out->set_step(static_cast<uint32_t>(status->step + 1));
  out->set_percent(status->percent);
  out->set_in_step_seconds(static_cast<double>(status->in_step.count()) / 1e3);
  out->set_reason(status->reason);
  DescribeWindow(status->candidate, out->mutable_observed());
  DescribeWindow(status->baseline, out->mutable_baseline_observed());
  if (status->plan.agreement) {
    out->mutable_mirrored()->set_compared(status->mirrored.compared);
    out->mutable_mirrored()->set_agreed(status->mirrored.agreed);
    out->mutable_mirrored()->set_skipped(status->mirrored.skipped);
  }
  out->set_baseline_retired(status->baseline_retired);
  out->set_retire_in_seconds(status->retire_in_seconds);
  return grpc::Status::OK;
}

}  // namespace

// The answers to every unary RPC. Most answer at once (they return the status); ModelInfer and
// the repository calls answer later through `finish`. Never blocks: the caller is a queue's poller.
class GrpcServer::Handlers {
 public:
  using Finish = std::function<void(const grpc::Status&)>;

  explicit Handlers(InferenceServer* server) : server_(server) {}

  grpc::Status ServerLive(const inference::ServerLiveRequest&, inference::ServerLiveResponse* response) {
    response->set_live(server_->IsLive());
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(const inference::ServerReadyRequest&, inference::ServerReadyResponse* response) {
    response->set_ready(server_->IsReady());
    return grpc::Status::OK;
  }

  // Ready: loaded and serving. Known to the repository but not loaded: ready false. Unknown:
  // NOT_FOUND, as over HTTP.
  grpc::Status ModelReady(const inference::ModelReadyRequest& request,
                          inference::ModelReadyResponse* response) {
    auto version = VersionFrom(request.version());
    if (!version.ok()) return Error(version.status());
    const ModelReadiness readiness = server_->ModelStateOf(request.name(), *version);
    if (readiness.state == ModelState::kUnknown) return Error(Status::NotFound(readiness.reason));
    response->set_ready(readiness.state == ModelState::kReady);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(const inference::ServerMetadataRequest&,
                              inference::ServerMetadataResponse* response) {
    response->set_name(std::string(kServerName));
    response->set_version(kInferdVersion);
    for (std::string_view extension : ServerExtensions()) response->add_extensions(std::string(extension));
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(const inference::ModelMetadataRequest& request,
                             inference::ModelMetadataResponse* response) {
    auto model = Find(request.name(), request.version());
    if (!model.ok()) return Error(model.status());
    const inferd::ModelConfig& config = model->config();
    response->set_name(config.name());
    for (const ModelView& loaded : server_->LoadedVersions(config.name()))
      response->add_versions(std::to_string(loaded.version()));
    response->set_platform(ReportedPlatform(config));
    const bool batching = config.max_batch_size() > 0;
    DescribeTensors(config.input(), batching, response->mutable_inputs());
    DescribeTensors(config.output(), batching, response->mutable_outputs());
    return grpc::Status::OK;
  }

  // Parses, hands the request to the model and returns; the model's instance thread finishes it.
  void ModelInfer(grpc::ServerContext& context, ModelInferRequest& request, ModelInferResponse* response,
                  Finish finish) {
    auto parsed = ParseModelInferRequest(TakeMessage(&request));
    if (!parsed.ok()) return finish(Error(parsed.status()));
    if (Status status = ApplyClientDeadline(context, parsed->get()); !status.ok())
      return finish(Error(status));
    server_->InferAsync(std::move(parsed).value(),
                        [response, finish = std::move(finish)](StatusOr<InferResponse> result) {
                          if (!result.ok()) return finish(Error(result.status()));
                          EncodeModelInferResponse(*result, response);
                          finish(grpc::Status::OK);
                        });
  }

  grpc::Status ModelConfig(const inference::ModelConfigRequest& request,
                           inference::ModelConfigResponse* response) {
    auto model = Find(request.name(), request.version());
    if (!model.ok()) return Error(model.status());
    *response->mutable_config() = model->config();
    return grpc::Status::OK;
  }

  // No name: every loaded model. A name: its loaded versions, or the one asked for.
  grpc::Status ModelStatistics(const inference::ModelStatisticsRequest& request,
                               inference::ModelStatisticsResponse* response) {
    std::vector<ModelView> models;
    if (request.name().empty()) {
      models = server_->LoadedModels();
    } else {
      auto model = Find(request.name(), request.version());
      if (!model.ok()) return Error(model.status());
      models = request.version().empty() ? server_->LoadedVersions(request.name()) : std::vector<ModelView>{*model};
    }
    for (const ModelView& model : models) DescribeStats(model, response->add_model_stats());
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& request,
                               inference::RepositoryIndexResponse* response) {
    for (const auto& entry : server_->RepositoryIndex()) {
      if (request.ready() && entry.state != ModelState::kReady) continue;
      auto* model = response->add_models();
      model->set_name(entry.name);
      if (entry.version > 0) model->set_version(std::to_string(entry.version));
      model->set_state(std::string(ModelStateName(entry.state)));
      model->set_reason(entry.reason);
      if (entry.state == ModelState::kReady) {
        model->set_load_seconds(entry.load_seconds);
        model->set_warmup_seconds(entry.warmup_seconds);
        model->set_first_request_seconds(entry.first_request_seconds);
      }
    }
    return grpc::Status::OK;
  }

  void RepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                           inference::RepositoryModelLoadResponse*, Finish finish) {
    auto override = ParseLoadParameters(request);
    if (!override.ok()) return finish(Error(override.status()));
    server_->LoadModelAsync(request.model_name(), std::move(override).value(),
                            [finish = std::move(finish)](Status status) { finish(Error(status)); });
  }

  void RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                             inference::RepositoryModelUnloadResponse*, Finish finish) {
    // unload_dependents concerns ensembles' members; inferd has no ensembles, so it changes nothing.
    for (const auto& [key, value] : request.parameters()) {
      if (key != "unload_dependents") {
        return finish(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown unload parameter '" + key + "'"));
      }
    }
    server_->UnloadModelAsync(request.model_name(),
                              [finish = std::move(finish)](Status status) { finish(Error(status)); });
  }

  grpc::Status SystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                        inference::SystemSharedMemoryStatusResponse* response) {
    auto regions = server_->shared_memory().Regions(request.name());
    if (!regions.ok()) return Error(regions.status());
    for (const SharedMemoryRegionStatus& region : *regions) {
      auto& status = (*response->mutable_regions())[region.name];
      status.set_name(region.name);
      status.set_key(region.key);
      status.set_offset(region.offset);
      status.set_byte_size(region.byte_size);
    }
    return grpc::Status::OK;
  }

  grpc::Status SystemSharedMemoryRegister(const inference::SystemSharedMemoryRegisterRequest& request,
                                          inference::SystemSharedMemoryRegisterResponse*) {
    return Error(server_->shared_memory().Register(request.name(), request.key(), request.offset(), request.byte_size()));
  }

  grpc::Status SystemSharedMemoryUnregister(const inference::SystemSharedMemoryUnregisterRequest& request,
                                            inference::SystemSharedMemoryUnregisterResponse*) {
    return Error(server_->shared_memory().Unregister(request.name()));
  }

  // grpc.health.v1 Check (HealthOf says what is reported); an unknown name is NOT_FOUND, as the
  // health protocol specifies.
  grpc::Status HealthCheck(const grpc::health::v1::HealthCheckRequest& request,
                           grpc::health::v1::HealthCheckResponse* response) {
    const auto status = HealthOf(*server_, request.service());
    if (!status) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request.service() + "'");
    response->set_status(*status);
    return grpc::Status::OK;
  }

  grpc::Status GetTraffic(const lifecycle::TrafficRequest& request, lifecycle::TrafficResponse* response) {
    auto traffic = server_->Traffic(request.model_name());
    if (!traffic.ok()) return Error(traffic.status());
    DescribeTraffic(request.model_name(), *traffic, response);
    return grpc::Status::OK;
  }

  grpc::Status SetTraffic(const lifecycle::TrafficRequest& request, lifecycle::TrafficResponse* response) {
    auto change = ParseTrafficChange(request);
    if (!change.ok()) return Error(change.status());
    if (Status status = server_->SetTraffic(request.model_name(), std::move(change->split), std::move(change->labels));
        !status.ok()) {
      return Error(status);
    }
    return GetTraffic(request, response);
  }

  grpc::Status StartRollout(const lifecycle::StartRolloutRequest& request, lifecycle::RolloutResponse* response) {
    auto plan = ParseRolloutPlan(request.plan());
    if (!plan.ok()) return Error(plan.status());
    return DescribeRollout(server_->StartRollout(request.model_name(), std::move(plan).value()), response);
  }

  grpc::Status GetRollout(const lifecycle::RolloutRequest& request, lifecycle::RolloutResponse* response) {
    return DescribeRollout(server_->Rollout(request.model_name()), response);
  }

  grpc::Status RollbackRollout(const lifecycle::RolloutRequest& request, lifecycle::RolloutResponse* response) {
    return DescribeRollout(server_->RollbackRollout(request.model_name()), response);
  }

 private:
  StatusOr<ModelView> Find(const std::string& name, const std::string& version_text) {
    ASSIGN_OR_RETURN(int64_t version, VersionFrom(version_text));
    return server_->FindModel(name, version);
  }

  InferenceServer* const server_;
};

namespace {

// One polling thread per eight cores: a call costs its poller tens of microseconds.
int DefaultCallThreads() { return std::max(1, AvailableCpus() / 8); }  // the container's CPUs, not the node's

// Calls of one method kept offered per queue: ModelInfer arrives in bursts as deep as the clients'
// concurrency; the rest are rare.
constexpr int kInferCallsOffered = 32;

template <typename Request, typename Response, typename Handlers>
UnaryHandler<Request, Response> AtOnce(Handlers* handlers,
                                       grpc::Status (Handlers::*answer)(const Request&, Response*)) {
  return [handlers, answer](grpc::ServerContext&, Request& request, Response* response,
                            std::function<void(const grpc::Status&)> finish) {
    finish((handlers->*answer)(request, response));
  };
}

template <typename Request, typename Response, typename Handlers>
UnaryHandler<Request, Response> Later(Handlers* handlers,
                                      void (Handlers::*answer)(const Request&, Response*,
                                                               std::function<void(const grpc::Status&)>)) {
  return [handlers, answer](grpc::ServerContext&, Request& request, Response* response,
                            std::function<void(const grpc::Status&)> finish) {
    (handlers->*answer)(request, response, std::move(finish));
  };
}

// `method` is a Request... member of one of the generated service's mixins, hence its own class.
template <typename Service, typename MixinService, typename Request, typename Response>
std::unique_ptr<UnaryRoute> Route(
    CallQueues* queues, Service* service,
    void (MixinService::*method)(grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
                                 grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*),
    std::type_identity_t<UnaryHandler<Request, Response>> handler, int offered = 1) {
  return std::make_unique<UnaryRouteFor<MixinService, Request, Response>>(queues, service, method,
                                                                          std::move(handler), offered);
}

}  // namespace

// Every method of both services is asynchronous, so each needs a route in AddRoutes: a method no
// call object is ever offered for would leave its callers waiting forever.
struct GrpcServer::Services {
  inference::GRPCInferenceService::AsyncService inference;
  grpc::health::v1::Health::AsyncService health;
  lifecycle::Lifecycle::AsyncService lifecycle;
};

GrpcServer::GrpcServer(GrpcServerOptions options, InferenceServer* server)
    : options_(std::move(options)),
      server_(server),
      handlers_(std::make_unique<Handlers>(server)),
      services_(std::make_unique<Services>()) {}

GrpcServer::~GrpcServer() { Stop(std::chrono::milliseconds(0)); }

void GrpcServer::AddRoutes() {
  using Inference = inference::GRPCInferenceService::AsyncService;
  using grpc::health::v1::Health;
  CallQueues* queues = queues_.get();
  Inference* inference = &services_->inference;
  Handlers* handlers = handlers_.get();
  routes_.push_back(
      Route(queues, inference, &Inference::RequestServerLive, AtOnce(handlers, &Handlers::ServerLive)));
  routes_.push_back(
      Route(queues, inference, &Inference::RequestServerReady, AtOnce(handlers, &Handlers::ServerReady)));
  routes_.push_back(
      Route(queues, inference, &Inference::RequestModelReady, AtOnce(handlers, &Handlers::ModelReady)));
  routes_.push_back(Route(queues, inference, &Inference::RequestServerMetadata,
                          AtOnce(handlers, &Handlers::ServerMetadata)));
  routes_.push_back(
      Route(queues, inference, &Inference::RequestModelMetadata, AtOnce(handlers, &Handlers::ModelMetadata)));
  routes_.push_back(
      Route(queues, inference, &Inference::RequestModelConfig, AtOnce(handlers, &Handlers::ModelConfig)));
  routes_.push_back(Route(queues, inference, &Inference::RequestModelStatistics,
                          AtOnce(handlers, &Handlers::ModelStatistics)));
  routes_.push_back(Route(queues, inference, &Inference::RequestRepositoryIndex,
                          AtOnce(handlers, &Handlers::RepositoryIndex)));
  routes_.push_back(Route(queues, inference, &Inference::RequestRepositoryModelLoad,
                          Later(handlers, &Handlers::RepositoryModelLoad)));
  routes_.push_back(Route(queues, inference, &Inference::RequestRepositoryModelUnload,
                          Later(handlers, &Handlers::RepositoryModelUnload)));
  routes_.push_back(Route(queues, inference, &Inference::RequestSystemSharedMemoryStatus,
                          AtOnce(handlers, &Handlers::SystemSharedMemoryStatus)));
  routes_.push_back(Route(queues, inference, &Inference::RequestSystemSharedMemoryRegister,
                          AtOnce(handlers, &Handlers::SystemSharedMemoryRegister)));
  routes_.push_back(Route(queues, inference, &Inference::RequestSystemSharedMemoryUnregister,
                          AtOnce(handlers, &Handlers::SystemSharedMemoryUnregister)));
  routes_.push_back(Route(
      queues, inference, &Inference::RequestModelInfer,
      [handlers](grpc::ServerContext& context, ModelInferRequest& request, ModelInferResponse* response,
                 Handlers::Finish finish) {
        handlers->ModelInfer(context, request, response, std::move(finish));
      },
      kInferCallsOffered));
  routes_.push_back(Route(queues, &services_->health, &Health::AsyncService::RequestCheck,
                          AtOnce(handlers, &Handlers::HealthCheck)));
  using Lifecycle = lifecycle::Lifecycle::AsyncService;
  Lifecycle* lifecycle = &services_->lifecycle;
  routes_.push_back(Route(queues, lifecycle, &Lifecycle::RequestGetTraffic, AtOnce(handlers, &Handlers::GetTraffic)));
  routes_.push_back(Route(queues, lifecycle, &Lifecycle::RequestSetTraffic, AtOnce(handlers, &Handlers::SetTraffic)));
  routes_.push_back(
      Route(queues, lifecycle, &Lifecycle::RequestStartRollout, AtOnce(handlers, &Handlers::StartRollout)));
  routes_.push_back(Route(queues, lifecycle, &Lifecycle::RequestGetRollout, AtOnce(handlers, &Handlers::GetRollout)));
  routes_.push_back(
      Route(queues, lifecycle, &Lifecycle::RequestRollbackRollout, AtOnce(handlers, &Handlers::RollbackRollout)));
}

Status GrpcServer::Start() {
  grpc::ServerBuilder builder;
  const std::string address = options_.address + ":" + std::to_string(options_.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             options_.keepalive_permit_without_calls ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, options_.http2_max_pings_without_data);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options_.http2_min_recv_ping_interval_without_data_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, options_.http2_max_ping_strikes);
  builder.RegisterService(&services_->inference);
  builder.RegisterService(&services_->health);
  builder.RegisterService(&services_->lifecycle);
  queues_ = std::make_unique<CallQueues>(
      builder, options_.call_threads > 0 ? options_.call_threads : DefaultCallThreads());
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || port_ == 0) {
    grpc_server_.reset();
    return Status::Unavailable("cannot listen for gRPC on " + address);
  }
  AddRoutes();
  for (auto& route : routes_) route->OfferAll();
  for (size_t i = 0; i < queues_->size(); ++i) {
    StreamInferCall::Offer(server_, &services_->inference, queues_.get(), i);
    HealthWatchCall::Offer(server_, &services_->health, queues_.get(), i);
  }
  queues_->Start();
  return Status::Ok();
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (!grpc_server_) return;
  grpc_server_->Shutdown(std::chrono::system_clock::now() + grace);
  grpc_server_->Wait();
  queues_->Stop();
  grpc_server_.reset();
}

}  // namespace inferd
