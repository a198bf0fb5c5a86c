// A router's remote pool (pipeline/router_plan.h's pool.NAME): other KServe v2 gRPC servers that
// take the router's requests. The interface lives here so the router does not depend on gRPC; the
// server gives routers a factory (pipeline/grpc_pool.h builds the real one).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/infer_request.h"
#include "common/status.h"
#include "pipeline/router_plan.h"

namespace inferd {

class RemotePool {
 public:
  virtual ~RemotePool() = default;
  // Sends `request` to the pool; its client_timeout_us (0: none) is the call's deadline. `done` is
  // called exactly once, from a thread of the pool's.
  virtual void Infer(std::unique_ptr<InferRequest> request, InferCallback done) = 0;
  // The channel's state now, for /stats: "idle", "connecting", "ready", "transient_failure".
  virtual std::string ChannelState() const = 0;
};

using RemotePoolFactory = std::function<StatusOr<std::shared_ptr<RemotePool>>(const PoolSpec& pool)>;

}  // namespace inferd
