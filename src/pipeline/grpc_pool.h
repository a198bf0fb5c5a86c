// A router's remote pool over gRPC (pipeline/remote_pool.h), on gRPC's own client machinery, not
// a balancer of ours: one channel per pool, `round_robin` over every address its target resolves
// to, client-side health checking (grpc.health.v1 Watch: a replica that is draining or not ready
// leaves the rotation), keepalive pings every 30 s, 100 MB messages, and gRPC's retry policy (at
// most one retry, on UNAVAILABLE, within the call's deadline, throttled by its retry budget).
// Calls are KServe v2 ModelInfer on gRPC's callback API: no thread waits on a call.
#pragma once

#include <memory>

#include "pipeline/remote_pool.h"

namespace inferd {

// The service config a pool's channel gets (round_robin, health checking, retries): one place,
// unit-tested.
std::string PoolServiceConfig(const PoolSpec& pool);

StatusOr<std::shared_ptr<RemotePool>> MakeGrpcPool(const PoolSpec& pool);

}  // namespace inferd
