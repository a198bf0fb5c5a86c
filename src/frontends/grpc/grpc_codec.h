// KServe v2 gRPC messages <-> the server's request and response types. Pure functions over
// messages, so they are unit tested and fuzzed without a server.
#pragma once

#include <memory>

#include "common/infer_request.h"
#include "common/load_override.h"
#include "common/traffic_plan.h"
#include "grpc_service.pb.h"
#include "lifecycle.pb.h"

namespace inferd {

// Tensors given in raw_input_contents point into `message` (no copy), which therefore stays alive
// as long as any of them. Bad structure (unknown datatype, negative dims, contents that do not
// match the shape, raw and typed contents mixed) is INVALID_ARGUMENT; what depends on the model
// (names, datatypes, batch size) is checked later by the core, as for every frontend.
StatusOr<std::unique_ptr<InferRequest>> ParseModelInferRequest(
    std::shared_ptr<const inference::ModelInferRequest> message);

// Every output travels in raw_output_contents, as Triton answers: one copy from the tensor into
// the message, and no per-element work.
void EncodeModelInferResponse(const InferResponse& response, inference::ModelInferResponse* out);

// The client's side: inputs travel raw; requested outputs, priority and timeout as parameters.
void EncodeModelInferRequest(const InferRequest& request, inference::ModelInferRequest* out);
// Raw outputs point into `message` (no copy); typed contents are accepted too (other servers).
// Triton's load parameters: "config" (string_param, the config as JSON) and "file:<path>"
// (bytes_param, the file's contents). Anything else is INVALID_ARGUMENT.
StatusOr<LoadOverride> ParseLoadParameters(const inference::RepositoryModelLoadRequest& request);

// inferd.lifecycle's SetTraffic and StartRollout, into the same types the HTTP routes parse.
StatusOr<TrafficChange> ParseTrafficChange(const lifecycle::TrafficRequest& request);
StatusOr<RolloutPlan> ParseRolloutPlan(const lifecycle::RolloutPlan& plan);
// The plan as the service answers it.
void EncodeRolloutPlan(const RolloutPlan& plan, lifecycle::RolloutPlan* out);

StatusOr<InferResponse> ParseModelInferResponse(std::shared_ptr<const inference::ModelInferResponse> message);

}  // namespace inferd
