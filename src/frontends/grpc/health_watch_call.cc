#include "frontends/grpc/health_watch_call.h"

#include <chrono>

namespace inferd {

using grpc::health::v1::HealthCheckResponse;

std::optional<HealthCheckResponse::ServingStatus> HealthOf(const InferenceServer& server, const std::string& service) {
  if (service.empty()) return server.IsReady() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  const ModelState state = server.ModelStateOf(service, 0).state;
  if (state == ModelState::kUnknown) return std::nullopt;
  return state == ModelState::kReady && !server.draining() ? HealthCheckResponse::SERVING
                                                           : HealthCheckResponse::NOT_SERVING;
}

void HealthWatchCall::Offer(InferenceServer* server, Service* service, CallQueues* queues, size_t queue_index) {
  queues->Offer(queue_index, [&](grpc::ServerCompletionQueue* queue) {
    auto* call = new HealthWatchCall(server, service, queues, queue_index);
    call->queue_ = queue;
    // Before the call starts: the done event is what tells a watch its client left.
    call->context_.AsyncNotifyWhenDone(&call->done_);
    service->RequestWatch(&call->context_, &call->request_, &call->writer_, queue, queue, &call->started_);
  });
}

void HealthWatchCall::OnStarted(bool ok) {
  if (!ok) {  // shutting down: this offered call was never used, and its done event never comes
    delete this;
    return;
  }
  Offer(server_, service_, queues_, queue_index_);
  queues_->CallStarted();
  WriteOrWait();
}

void HealthWatchCall::WriteOrWait() {
  if (client_gone_) return Finish(grpc::Status::CANCELLED);
  const auto status = HealthOf(*server_, request_.service());
  const int now = status ? static_cast<int>(*status) : static_cast<int>(HealthCheckResponse::SERVICE_UNKNOWN);
  if (last_written_ == now && server_->draining()) {
    return Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  operation_pending_ = true;
  if (last_written_ != now) {
    last_written_ = now;
    response_.set_status(static_cast<HealthCheckResponse::ServingStatus>(now));
    writer_.Write(response_, &write_done_);
    return;
  }
  alarm_pending_ = true;
  alarm_.Set(queue_, std::chrono::system_clock::now() + std::chrono::seconds(1), &alarm_event_);
}

void HealthWatchCall::OnWriteDone(bool ok) {
  operation_pending_ = false;
  if (!ok) client_gone_ = true;
  WriteOrWait();
}

void HealthWatchCall::OnAlarm(bool) {
  operation_pending_ = alarm_pending_ = false;
  WriteOrWait();
}

void HealthWatchCall::OnDone(bool) {
  client_gone_ = true;
  if (alarm_pending_) alarm_.Cancel();  // its event comes back (not ok) and finishes the call
  if (!operation_pending_ && !finishing_) return Finish(grpc::Status::CANCELLED);
  DeleteWhenComplete();
}

void HealthWatchCall::Finish(const grpc::Status& status) {
  if (finishing_) return DeleteWhenComplete();
  finishing_ = true;
  writer_.Finish(status, &finished_);
}

void HealthWatchCall::OnFinished(bool) {
  finished_seen_ = true;
  DeleteWhenComplete();
}

void HealthWatchCall::DeleteWhenComplete() {
  // The done event comes after Finish's, or, for a client that left, at any time: both must be in.
  if (finished_seen_ && client_gone_) {
    queues_->CallEnded();
    delete this;
  }
}

}  // namespace inferd
