// Helpers both kinds of inference call need (unary ModelInfer in grpc_server.cc, the stream in
// stream_infer_call.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "common/infer_request.h"
#include "common/status.h"
#include "grpc_service.pb.h"

namespace inferd {

// The time the client has left, carried into the queue so the request is dropped unexecuted once
// nobody waits for it. DEADLINE_EXCEEDED when it has already passed.
inline Status ApplyClientDeadline(const grpc::ServerContextBase& context, InferRequest* request) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Status::Ok();
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::system_clock::now());
  if (left.count() <= 0)
    return Status::DeadlineExceeded("the client's deadline passed before the request was queued");
  request->client_timeout_us = static_cast<uint64_t>(left.count());
  return Status::Ok();
}

// gRPC owns the request message only until the call finishes, while parsed tensors alias its raw
// contents and may outlive that (a batch holds them): move the contents into a message we own.
// Swap of two heap messages exchanges pointers; nothing is copied. The message is ours to change:
// gRPC handed it to this one call and reads it no more.
inline std::shared_ptr<const inference::ModelInferRequest> TakeMessage(
    const inference::ModelInferRequest* message) {
  auto owned = std::make_shared<inference::ModelInferRequest>();
  owned->Swap(const_cast<inference::ModelInferRequest*>(message));
  return owned;
}

}  // namespace inferd
