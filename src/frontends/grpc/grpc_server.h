// The KServe v2 gRPC frontend (inference.GRPCInferenceService) and grpc.health.v1, on gRPC's
// callback API: a handler parses, hands the request to InferenceServer::InferAsync and returns;
// the answer is finished from the completion callback. No gRPC thread ever waits for a model.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "core/inference_server.h"

namespace grpc {
class Server;
}

namespace inferd {

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8001;  // 0: any free port (see port())
  // Largest request or response message; a larger request is refused with RESOURCE_EXHAUSTED.
  int max_message_bytes = 64 << 20;
  // HTTP/2 keepalive, with gRPC's names and defaults (Triton exposes the same knobs).
  int keepalive_time_ms = 7'200'000;
  int keepalive_timeout_ms = 20'000;
  bool keepalive_permit_without_calls = false;
  int http2_max_pings_without_data = 2;
  int http2_min_recv_ping_interval_without_data_ms = 300'000;
  int http2_max_ping_strikes = 2;
};

class GrpcServer {
 public:
  GrpcServer(GrpcServerOptions options, InferenceServer* server);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  Status Start();
  int port() const { return port_; }
  // Stops taking calls; calls in progress get until `grace` to finish, then are cancelled. Call
  // after InferenceServer::Shutdown, which answers every request a call may be waiting for.
  void Stop(std::chrono::milliseconds grace);

 private:
  class InferenceService;
  class HealthService;

  const GrpcServerOptions options_;
  std::unique_ptr<InferenceService> inference_service_;
  std::unique_ptr<HealthService> health_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
};

}  // namespace inferd
