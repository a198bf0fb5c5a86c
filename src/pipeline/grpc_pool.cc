#include "pipeline/grpc_pool.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/grpc_status.h"
#include "grpc_service.grpc.pb.h"

namespace inferd {
namespace {

constexpr int kMaxMessageBytes = 100 * 1024 * 1024;  // the seeds' 100 MB
constexpr int kKeepaliveMs = 30'000;                 // the seeds' 30 s
constexpr int kKeepaliveTimeoutMs = 10'000;

std::string ChannelStateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "transient_failure";
    case GRPC_CHANNEL_SHUTDOWN: return "shutdown";
  }
  return "unknown";
}

// One call in flight: owns its context and messages until gRPC calls back.
struct PoolCall {
  grpc::ClientContext context;
  inference::ModelInferRequest request;
  std::shared_ptr<inference::ModelInferResponse> response = std::make_shared<inference::ModelInferResponse>();
  InferCallback done;
};

class GrpcPool final : public RemotePool {
 public:
  explicit GrpcPool(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)),
        stub_(inference::GRPCInferenceService::NewStub(channel_)) {}

  void Infer(std::unique_ptr<InferRequest> request, InferCallback done) override {
    auto* call = new PoolCall;
    call->done = std::move(done);
    if (request->client_timeout_us > 0) {
      call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(request->client_timeout_us));
    }
    request->client_timeout_us = 0;  // travels as the gRPC deadline
    EncodeModelInferRequest(*request, &call->request);
    stub_->async()->ModelInfer(&call->context, &call->request, call->response.get(), [call](grpc::Status status) {
      std::unique_ptr<PoolCall> owned(call);
      if (!status.ok()) return owned->done(FromGrpcStatus(status));
      owned->done(ParseModelInferResponse(owned->response));
    });
  }

  std::string ChannelState() const override { return ChannelStateName(channel_->GetState(false)); }

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

}  // namespace

std::string PoolServiceConfig(const PoolSpec& pool) {
  std::string retry;
  if (pool.retries > 0) {
    retry = fmt::format(
        R"(,"retryPolicy":{{"maxAttempts":{},"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,)"
        R"("retryableStatusCodes":["UNAVAILABLE"]}})",
        pool.retries + 1);
  }
  return fmt::format(
      R"({{"loadBalancingConfig":[{{"round_robin":{{}}}}],"healthCheckConfig":{{"serviceName":""}},)"
      R"("methodConfig":[{{"name":[{{"service":"inference.GRPCInferenceService","method":"ModelInfer"}}]{}}}],)"
      R"("retryThrottling":{{"maxTokens":{},"tokenRatio":{}}}}})",
      retry, pool.retry_max_tokens, pool.retry_token_ratio);
}

StatusOr<std::shared_ptr<RemotePool>> MakeGrpcPool(const PoolSpec& pool) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxMessageBytes);
  arguments.SetMaxSendMessageSize(kMaxMessageBytes);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  arguments.SetServiceConfigJSON(PoolServiceConfig(pool));
  // Reconnect soon after a replica comes back: the default backoff grows to two minutes.
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  auto channel = grpc::CreateCustomChannel(pool.channel_target, grpc::InsecureChannelCredentials(), arguments);
  if (!channel) return Status::InvalidArgument("pool '" + pool.name + "': cannot create a channel to " + pool.address);
  return std::shared_ptr<RemotePool>(std::make_shared<GrpcPool>(std::move(channel)));
}

}  // namespace inferd
