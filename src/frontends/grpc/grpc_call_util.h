// Helpers both kinds of inference call need (unary ModelInfer in grpc_server.cc, the stream in
// stream_infer_call.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "common/infer_request.h"
#include "common/status.h"
#include "frontends/grpc/call_queues.h"
#include "frontends/grpc/message_pool.h"
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

// ModelInfer's messages, kept with their tensors' strings (message_pool.h): the unary calls take
// theirs from these pools and give them back when they end (MessageRecycling below).
inline size_t RawContentsCapacity(const google::protobuf::RepeatedPtrField<std::string>& contents) {
  size_t bytes = 0;
  for (const std::string& content : contents) bytes += content.capacity();
  return bytes;
}

inline MessagePool<inference::ModelInferRequest>& InferRequestMessages() {
  static auto* const pool = new MessagePool<inference::ModelInferRequest>(
      {}, [](const inference::ModelInferRequest& m) { return RawContentsCapacity(m.raw_input_contents()); });
  return *pool;
}

inline MessagePool<inference::ModelInferResponse>& InferResponseMessages() {
  static auto* const pool = new MessagePool<inference::ModelInferResponse>(
      {}, [](const inference::ModelInferResponse& m) { return RawContentsCapacity(m.raw_output_contents()); });
  return *pool;
}

template <>
struct MessageRecycling<inference::ModelInferRequest> {
  static std::unique_ptr<inference::ModelInferRequest> Take() { return InferRequestMessages().Take(); }
  static void Give(std::unique_ptr<inference::ModelInferRequest> m) { InferRequestMessages().Give(std::move(m)); }
};

template <>
struct MessageRecycling<inference::ModelInferResponse> {
  static std::unique_ptr<inference::ModelInferResponse> Take() { return InferResponseMessages().Take(); }
  static void Give(std::unique_ptr<inference::ModelInferResponse> m) { InferResponseMessages().Give(std::move(m)); }
};

// gRPC owns the request message only until the call finishes, while parsed tensors alias its raw
// contents and may outlive that (a batch holds them): move the contents into a message we own.
// Swap of two heap messages exchanges pointers; nothing is copied. The message is ours to change:
// gRPC handed it to this one call and reads it no more. The call keeps the pooled message's
// cleared strings in exchange and gives them back when it ends; ours goes back to the pool when
// the last tensor lets go of it.
inline std::shared_ptr<const inference::ModelInferRequest> TakeMessage(
    const inference::ModelInferRequest* message) {
  auto owned = InferRequestMessages().Take();
  owned->Swap(const_cast<inference::ModelInferRequest*>(message));
  return InferRequestMessages().Share(std::move(owned));
}

}  // namespace inferd
