// ModelStreamInfer on a completion queue: reads, runs and answers requests concurrently; answers
// are written one at a time in completion order, an error answer carries `error_message` and the
// stream goes on.
#pragma once

// clang-format off
// Before gRPC's headers: through it common/mutex.h defines the thread-safety macros (GUARDED_BY...),
// which absl, included by gRPC, defines only when they are not defined yet.
#include "core/inference_server.h"
// clang-format on

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>

#include "frontends/grpc/call_queues.h"
#include "grpc_service.grpc.pb.h"

namespace inferd {

class StreamInferCall {
 public:
  using Service = inference::GRPCInferenceService::AsyncService;

  // Offers one call object for the next stream on queue `queue_index`; each stream that arrives
  // offers its successor.
  static void Offer(InferenceServer* server, Service* service, CallQueues* queues, size_t queue_index);

 private:
  // Each kind of event has its own tag; the queue's poller calls back into the call.
  struct Event final : CallEvent {
    Event(StreamInferCall* call, void (StreamInferCall::*handle)(bool)) : call(call), handle(handle) {}
    void Proceed(bool ok) override { (call->*handle)(ok); }
    StreamInferCall* const call;
    void (StreamInferCall::*const handle)(bool);
  };

  // What changed, applied under the lock by Pump together with the decision of what to start next.
  struct Change {
    bool read_ended = false;     // a read finished: reading_ = false
    bool reads_over = false;     // ... and it was the last (the client half-closed or left)
    bool request_taken = false;  // ... and it brought a request: one more in flight
    bool write_ended = false;    // a write finished: writing_ = false
    bool write_failed = false;   // ... and the client is gone
    std::unique_ptr<inference::ModelStreamInferResponse> answer;  // an answer to queue (one fewer in flight)
  };

  StreamInferCall(InferenceServer* server, Service* service, CallQueues* queues, size_t queue_index)
      : server_(server), service_(service), queues_(queues), queue_index_(queue_index) {}

  void OnStarted(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinished(bool ok);
  void Run(std::shared_ptr<const inference::ModelInferRequest> message);
  // Applies `change` and decides under the lock what to start; starts it outside the lock. Once it
  // returns, the caller must not touch the call unless it started something: the decision and the
  // change are one step, so no other thread can finish (and delete) the call in between.
  void Pump(Change change);

  InferenceServer* const server_;
  Service* const service_;
  CallQueues* const queues_;
  const size_t queue_index_;

  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest> stream_{
      &context_};
  Event started_{this, &StreamInferCall::OnStarted};
  Event read_done_{this, &StreamInferCall::OnReadDone};
  Event write_done_{this, &StreamInferCall::OnWriteDone};
  Event finished_event_{this, &StreamInferCall::OnFinished};

  // Touched only by the one read (or write) in progress, which the flags below serialise.
  std::unique_ptr<inference::ModelInferRequest> incoming_;
  std::unique_ptr<inference::ModelStreamInferResponse> current_write_;

  Mutex mu_;
  std::deque<std::unique_ptr<inference::ModelStreamInferResponse>> writes_ GUARDED_BY(mu_);
  int inflight_ GUARDED_BY(mu_) = 0;
  bool reading_ GUARDED_BY(mu_) = false;
  bool writing_ GUARDED_BY(mu_) = false;
  bool reads_done_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
};

}  // namespace inferd
