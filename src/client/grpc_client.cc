// The gRPC transport: generated stubs of inference.GRPCInferenceService. Async calls use gRPC's
// callback API, so the client adds no threads of its own.
#include <grpcpp/grpcpp.h>

#include <limits>

#include "client/transports.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_status.h"
#include "grpc_service.grpc.pb.h"

namespace inferd::client {
namespace {

using inference::GRPCInferenceService;

std::string VersionText(int64_t version) { return version > 0 ? std::to_string(version) : std::string(); }

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(const ClientOptions& options) : timeout_(options.timeout) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
    arguments.SetMaxSendMessageSize(std::numeric_limits<int>::max());
    stub_ = GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(HostPort(options.url), grpc::InsecureChannelCredentials(), arguments));
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
      entries.push_back({model.name(), model.version(), model.state(), model.reason()});
    return entries;
  }

  Status LoadModel(const std::string& model) override {
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(model);
    inference::RepositoryModelLoadResponse response;
    return Call(&GRPCInferenceService::Stub::RepositoryModelLoad, request, &response);
  }

  Status UnloadModel(const std::string& model) override {
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name(model);
    inference::RepositoryModelUnloadResponse response;
    return Call(&GRPCInferenceService::Stub::RepositoryModelUnload, request, &response);
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
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(((*stub_).*method)(&context, request, response));
  }

  const std::chrono::milliseconds timeout_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

}  // namespace

std::unique_ptr<Client> MakeGrpcClient(const ClientOptions& options) { return std::make_unique<GrpcClient>(options); }

}  // namespace inferd::client
