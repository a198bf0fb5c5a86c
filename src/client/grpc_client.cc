// The gRPC transport: generated stubs of inference.GRPCInferenceService. Async calls use gRPC's
// callback API, so the client adds no threads of its own.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <limits>

#include "client/transports.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_status.h"
#include "grpc_service.grpc.pb.h"
#include "lifecycle.grpc.pb.h"

namespace inferd::client {
namespace {

using inference::GRPCInferenceService;
using inferd::lifecycle::Lifecycle;

TrafficInfo TrafficFrom(const lifecycle::TrafficResponse& response) {
  TrafficInfo info;
  for (const auto& [version, weight] : response.split().weights()) info.split[version] = weight;
  for (const auto& [label, version] : response.labels().labels()) info.labels[label] = version;
  return info;
}

StatusOr<RolloutInfo> RolloutFrom(const lifecycle::RolloutResponse& response) {
  RolloutInfo info;
  ASSIGN_OR_RETURN(info.plan, ParseRolloutPlan(response.plan()));
  info.state = response.state();
  info.step = response.step();
  info.percent = response.percent();
  info.in_step_seconds = response.in_step_seconds();
  info.reason = response.reason();
  info.requests = response.observed().requests();
  info.errors = response.observed().errors();
  info.p99_ms = response.observed().p99_ms();
  info.baseline_requests = response.baseline_observed().requests();
  info.baseline_p99_ms = response.baseline_observed().p99_ms();
  info.mirrored = {response.mirrored().compared(), response.mirrored().agreed(), response.mirrored().skipped()};
  info.baseline_retired = response.baseline_retired();
  info.retire_in_seconds = response.retire_in_seconds();
  return info;
}

std::string VersionText(int64_t version) { return version > 0 ? std::to_string(version) : std::string(); }

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(const ClientOptions& options) : timeout_(options.timeout) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
    arguments.SetMaxSendMessageSize(std::numeric_limits<int>::max());
    auto channel = grpc::CreateCustomChannel(HostPort(options.url), grpc::InsecureChannelCredentials(), arguments);
    stub_ = GRPCInferenceService::NewStub(channel);
    lifecycle_ = Lifecycle::NewStub(channel);
  }

  StatusOr<TrafficInfo> GetTraffic(const std::string& model) override {
    lifecycle::TrafficRequest request;
    request.set_model_name(model);
    lifecycle::TrafficResponse response;
    RETURN_IF_ERROR(CallOn(lifecycle_.get(), &Lifecycle::Stub::GetTraffic, request, &response));
    return TrafficFrom(response);
  }

  StatusOr<TrafficInfo> SetTraffic(const std::string& model, const TrafficChange& change) override {
    lifecycle::TrafficRequest request;
    request.set_model_name(model);
    if (change.split) {
      auto* weights = request.mutable_split()->mutable_weights();
      for (const auto& [version, weight] : *change.split) (*weights)[version] = weight;
    }
    if (change.labels) {
      auto* labels = request.mutable_labels()->mutable_labels();
      for (const auto& [label, version] : *change.labels) (*labels)[label] = version;
    }
    lifecycle::TrafficResponse response;
    RETURN_IF_ERROR(CallOn(lifecycle_.get(), &Lifecycle::Stub::SetTraffic, request, &response));
    return TrafficFrom(response);
  }

  StatusOr<RolloutInfo> StartRollout(const std::string& model, const RolloutPlan& plan) override {
    lifecycle::StartRolloutRequest request;
    request.set_model_name(model);
    EncodeRolloutPlan(plan, request.mutable_plan());
    lifecycle::RolloutResponse response;
    RETURN_IF_ERROR(CallOn(lifecycle_.get(), &Lifecycle::Stub::StartRollout, request, &response));
    return RolloutFrom(response);
  }

  StatusOr<RolloutInfo> GetRollout(const std::string& model) override {
    return RolloutCall(&Lifecycle::Stub::GetRollout, model);
  }

  StatusOr<RolloutInfo> RollbackRollout(const std::string& model) override {
    return RolloutCall(&Lifecycle::Stub::RollbackRollout, model);
  }

  StatusOr<bool> ServerLive() override {
    inference::ServerLiveResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ServerLive, inference::ServerLiveRequest(), &response));
    return response.live();
  }

  StatusOr<bool> ServerReady() override {
    inference::ServerReadyResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ServerReady, inference::ServerReadyRequest(), &response));
    return response.ready();
  }

  StatusOr<bool> ModelReady(const std::string& model, int64_t version) override {
    inference::ModelReadyRequest request;
    request.set_name(model);
    request.set_version(VersionText(version));
    inference::ModelReadyResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ModelReady, request, &response));
    return response.ready();
  }

  StatusOr<ModelMetadata> GetModelMetadata(const std::string& model, int64_t version) override {
    inference::ModelMetadataRequest request;
    request.set_name(model);
    request.set_version(VersionText(version));
    inference::ModelMetadataResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ModelMetadata, request, &response));
    ModelMetadata metadata{.name = response.name(),
                           .versions = {response.versions().begin(), response.versions().end()},
                           .platform = response.platform()};
    for (const auto& [from, to] : {std::pair{&response.inputs(), &metadata.inputs},
                                   std::pair{&response.outputs(), &metadata.outputs}}) {
      for (const auto& tensor : *from)
        to->push_back({tensor.name(), tensor.datatype(), {tensor.shape().begin(), tensor.shape().end()}});
    }
    return metadata;
  }

  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(const std::string& model, int64_t version) override {
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    request.set_version(VersionText(version));
    inference::ModelStatisticsResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ModelStatistics, request, &response));
    std::vector<ModelStatistics> all;
    for (const auto& stats : response.model_stats()) {
      const auto& inference = stats.inference_stats();
      all.push_back({.name = stats.name(),
                     .version = stats.version(),
                     .inference_count = stats.inference_count(),
                     .execution_count = stats.execution_count(),
                     .success_count = inference.success().count(),
                     .success_ns = inference.success().ns(),
                     .queue_count = inference.queue().count(),
                     .queue_ns = inference.queue().ns(),
                     .compute_input_ns = inference.compute_input().ns(),
                     .compute_infer_ns = inference.compute_infer().ns(),
                     .compute_output_ns = inference.compute_output().ns()});
    }
    return all;
  }

  StatusOr<std::vector<RepositoryEntry>> GetRepositoryIndex() override {
    inference::RepositoryIndexResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::RepositoryIndex, inference::RepositoryIndexRequest(), &response));
    std::vector<RepositoryEntry> entries;
    for (const auto& model : response.models())
      entries.push_back({model.name(), model.version(), model.state(), model.reason(),
                         model.has_load_seconds() ? model.load_seconds() : -1,
                         model.has_warmup_seconds() ? model.warmup_seconds() : -1,
                         model.has_first_request_seconds() ? model.first_request_seconds() : -1});
    return entries;
  }

  StatusOr<std::string> GetModelConfigJson(const std::string& model) override {
    inference::ModelConfigRequest request;
    request.set_name(model);
    inference::ModelConfigResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ModelConfig, request, &response));
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    if (!google::protobuf::util::MessageToJsonString(response.config(), &json, options).ok()) {
      return Status::Internal("the model's config cannot be written as JSON");
    }
    return json;
  }

  using Client::LoadModel;
  Status LoadModel(const std::string& model, const std::string& config_json) override {
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(model);
    if (!config_json.empty()) (*request.mutable_parameters())["config"].set_string_param(config_json);
    inference::RepositoryModelLoadResponse response;
    return Call(&GRPCInferenceService::Stub::RepositoryModelLoad, request, &response);
  }

  Status UnloadModel(const std::string& model) override {
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name(model);
    inference::RepositoryModelUnloadResponse response;
    return Call(&GRPCInferenceService::Stub::RepositoryModelUnload, request, &response);
  }

  Status RegisterSystemSharedMemory(const std::string& name, const std::string& key, uint64_t offset,
                                    uint64_t byte_size) override {
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_key(key);
    request.set_offset(offset);
    request.set_byte_size(byte_size);
    inference::SystemSharedMemoryRegisterResponse response;
    return Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, request, &response);
  }

  Status UnregisterSystemSharedMemory(const std::string& name) override {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse response;
    return Call(&GRPCInferenceService::Stub::SystemSharedMemoryUnregister, request, &response);
  }

  StatusOr<std::vector<SharedMemoryRegionInfo>> GetSystemSharedMemoryStatus(const std::string& name) override {
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(name);
    inference::SystemSharedMemoryStatusResponse response;
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::SystemSharedMemoryStatus, request, &response));
    std::vector<SharedMemoryRegionInfo> regions;
    for (const auto& [region_name, region] : response.regions()) {
      regions.push_back({region.name(), region.key(), region.offset(), region.byte_size()});
    }
    return regions;
  }

  StatusOr<InferResponse> Infer(const InferRequest& request) override {
    inference::ModelInferRequest message;
    EncodeModelInferRequest(request, &message);
    auto response = std::make_shared<inference::ModelInferResponse>();
    RETURN_IF_ERROR(Call(&GRPCInferenceService::Stub::ModelInfer, message, response.get()));
    return ParseModelInferResponse(std::move(response));
  }

  void InferAsync(const InferRequest& request, InferCallback done) override {
    struct Pending {
      grpc::ClientContext context;
      inference::ModelInferRequest request;
      std::shared_ptr<inference::ModelInferResponse> response = std::make_shared<inference::ModelInferResponse>();
      InferCallback done;
    };
    auto* pending = new Pending();  // owned by the completion below
    pending->done = std::move(done);
    EncodeModelInferRequest(request, &pending->request);
    SetDeadline(&pending->context);
    stub_->async()->ModelInfer(&pending->context, &pending->request, pending->response.get(),
                               [pending](grpc::Status status) {
                                 std::unique_ptr<Pending> owned(pending);
                                 if (!status.ok()) return owned->done(FromGrpcStatus(status));
                                 owned->done(ParseModelInferResponse(std::move(owned->response)));
                               });
  }

 private:
  void SetDeadline(grpc::ClientContext* context) const {
    if (timeout_.count() > 0) context->set_deadline(std::chrono::system_clock::now() + timeout_);
  }

  template <typename Method, typename Request, typename Response>
  Status Call(Method method, const Request& request, Response* response) {
    return CallOn(stub_.get(), method, request, response);
  }

  template <typename Stub, typename Method, typename Request, typename Response>
  Status CallOn(Stub* stub, Method method, const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus((stub->*method)(&context, request, response));
  }

  template <typename Method>
  StatusOr<RolloutInfo> RolloutCall(Method method, const std::string& model) {
    lifecycle::RolloutRequest request;
    request.set_model_name(model);
    lifecycle::RolloutResponse response;
    RETURN_IF_ERROR(CallOn(lifecycle_.get(), method, request, &response));
    return RolloutFrom(response);
  }

  const std::chrono::milliseconds timeout_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
  std::unique_ptr<Lifecycle::Stub> lifecycle_;
};

}  // namespace

std::unique_ptr<Client> MakeGrpcClient(const ClientOptions& options) { return std::make_unique<GrpcClient>(options); }

}  // namespace inferd::client
