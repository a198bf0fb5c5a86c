// grpc.health.v1 Health/Watch on a completion queue: the serving status now, then again each time
// it changes (checked once a second), until the client leaves. gRPC's client-side health checking
// (a channel's healthCheckConfig, used by routers' remote pools) watches this stream: a replica
// that is draining or not ready leaves its clients' round_robin rotation. A draining server ends
// its watches after telling them NOT_SERVING, so shutdown does not wait on them.
#pragma once

// clang-format off
// Before gRPC's headers (stream_infer_call.h says why).
#include "core/inference_server.h"
// clang-format on

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

#include "frontends/grpc/call_queues.h"
#include "health.grpc.pb.h"

namespace inferd {

// The status grpc.health.v1 reports for `service`: "" is the server as a whole (its readiness), a
// model name that model's newest version; nullopt for a name the server does not know.
std::optional<grpc::health::v1::HealthCheckResponse::ServingStatus> HealthOf(const InferenceServer& server,
                                                                           const std::string& service);

class HealthWatchCall {
 public:
  using Service = grpc::health::v1::Health::AsyncService;

  // Offers one call object for the next Watch on queue `queue_index`; each arrival offers its successor.
  static void Offer(InferenceServer* server, Service* service, CallQueues* queues, size_t queue_index);

 private:
  // All of one call's events arrive on its queue's single poller thread: no lock is needed.
  struct Event final : CallEvent {
    Event(HealthWatchCall* call, void (HealthWatchCall::*handle)(bool)) : call(call), handle(handle) {}
    void Proceed(bool ok) override { (call->*handle)(ok); }
    HealthWatchCall* const call;
    void (HealthWatchCall::*const handle)(bool);
  };

  HealthWatchCall(InferenceServer* server, Service* service, CallQueues* queues, size_t queue_index)
      : server_(server), service_(service), queues_(queues), queue_index_(queue_index) {}

  void OnStarted(bool ok);
  void OnWriteDone(bool ok);
  void OnAlarm(bool ok);
  void OnDone(bool ok);
  void OnFinished(bool ok);
  // Writes the status when it changed (or was never written), else waits a second.
  void WriteOrWait();
  void Finish(const grpc::Status& status);
  void DeleteWhenComplete();

  InferenceServer* const server_;
  Service* const service_;
  CallQueues* const queues_;
  const size_t queue_index_;
  grpc::CompletionQueue* queue_ = nullptr;

  grpc::ServerContext context_;
  grpc::health::v1::HealthCheckRequest request_;
  grpc::health::v1::HealthCheckResponse response_;
  grpc::ServerAsyncWriter<grpc::health::v1::HealthCheckResponse> writer_{&context_};
  grpc::Alarm alarm_;
  Event started_{this, &HealthWatchCall::OnStarted};
  Event write_done_{this, &HealthWatchCall::OnWriteDone};
  Event alarm_event_{this, &HealthWatchCall::OnAlarm};
  Event done_{this, &HealthWatchCall::OnDone};
  Event finished_{this, &HealthWatchCall::OnFinished};

  std::optional<int> last_written_;  // the status last sent
  bool operation_pending_ = false;   // a write or an alarm
  bool alarm_pending_ = false;
  bool client_gone_ = false;         // the done event came
  bool finishing_ = false;
  bool finished_seen_ = false;
};

}  // namespace inferd
