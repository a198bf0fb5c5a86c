// The KServe v2 gRPC frontend (inference.GRPCInferenceService) and grpc.health.v1, on gRPC's
// completion queues polled by threads of ours (call_queues.h says why not the callback API). An
// inference is parsed on the poller, handed to InferenceServer::InferAsync, and finished from the
// completion callback on the model's instance thread: no poller ever waits for a model.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/inference_server.h"

namespace grpc {
class Server;
}

namespace inferd {

class CallQueues;
class UnaryRoute;

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
  // Threads polling the completion queues every call runs on; 0: one per eight cores.
  int call_threads = 0;
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
  class Handlers;
  struct Services;  // the generated async services (their types cannot be declared here)
  void AddRoutes();

  const GrpcServerOptions options_;
  InferenceServer* const server_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<Services> services_;
  // Destroyed after grpc_server_ (declared before it): gRPC wants a server gone before its queues.
  std::unique_ptr<CallQueues> queues_;
  std::vector<std::unique_ptr<UnaryRoute>> routes_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
};

}  // namespace inferd
