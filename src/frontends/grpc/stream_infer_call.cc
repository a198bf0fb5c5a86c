#include "frontends/grpc/stream_infer_call.h"

#include "frontends/grpc/grpc_call_util.h"
#include "frontends/grpc/grpc_codec.h"

namespace inferd {
namespace {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

// A stream may have this many requests parsed and not yet answered; beyond it the stream stops
// reading until answers go out, so one client cannot pile up unbounded work through one stream
// (the model's queue limit still applies to each request).
constexpr int kMaxInflightPerStream = 64;

std::unique_ptr<ModelStreamInferResponse> ErrorResponse(const ModelInferRequest& request,
                                                        const Status& error) {
  auto response = std::make_unique<ModelStreamInferResponse>();
  response->set_error_message(error.message());
  response->mutable_infer_response()->set_id(request.id());
  response->mutable_infer_response()->set_model_name(request.model_name());
  response->mutable_infer_response()->set_model_version(request.model_version());
  return response;
}

}  // namespace

void StreamInferCall::Offer(InferenceServer* server, Service* service, CallQueues* queues,
                            size_t queue_index) {
  queues->Offer(queue_index, [&](grpc::ServerCompletionQueue* queue) {
    auto* call = new StreamInferCall(server, service, queues, queue_index);
    service->RequestModelStreamInfer(&call->context_, &call->stream_, queue, queue, &call->started_);
  });
}

void StreamInferCall::OnStarted(bool ok) {
  if (!ok) {  // the server is shutting down: this offered call was never used
    delete this;
    return;
  }
  Offer(server_, service_, queues_, queue_index_);
  queues_->CallStarted();
  Pump({});
}

void StreamInferCall::OnReadDone(bool ok) {
  if (!ok) return Pump({.read_ended = true, .reads_over = true});  // half-closed, or the call is gone
  std::shared_ptr<const ModelInferRequest> message = TakeMessage(incoming_.get());
  {
    // No Pump here: a read is still "in progress" for Pump's purposes until the one below, so the
    // call cannot finish while Run hands the request over.
    MutexLock lock(&mu_);
    ++inflight_;
  }
  Run(std::move(message));
  Pump({.read_ended = true});
}

void StreamInferCall::OnWriteDone(bool ok) { Pump({.write_ended = true, .write_failed = !ok}); }

void StreamInferCall::OnFinished(bool) {
  queues_->CallEnded();
  delete this;
}

void StreamInferCall::Run(std::shared_ptr<const ModelInferRequest> message) {
  auto parsed = ParseModelInferRequest(message);
  Status status = parsed.ok() ? ApplyClientDeadline(context_, parsed->get()) : parsed.status();
  if (!status.ok()) return Pump({.answer = ErrorResponse(*message, status)});
  // The message stays alive for the error answer (the request's tensors point into it anyway).
  server_->InferAsync(std::move(parsed).value(), [this, message](StatusOr<InferResponse> result) {
    if (!result.ok()) return Pump({.answer = ErrorResponse(*message, result.status())});
    auto response = std::make_unique<ModelStreamInferResponse>();
    EncodeModelInferResponse(*result, response->mutable_infer_response());
    Pump({.answer = std::move(response)});
  });
}

void StreamInferCall::Pump(Change change) {
  bool write = false, read = false, finish = false, cancelled = false;
  {
    MutexLock lock(&mu_);
    if (change.read_ended) reading_ = false;
    if (change.reads_over) reads_done_ = true;
    if (change.write_ended) writing_ = false;
    if (change.write_failed) broken_ = true;  // the client is gone: later answers have nowhere to go
    if (change.answer) {
      --inflight_;
      if (!broken_) writes_.push_back(std::move(change.answer));
    }
    if (broken_) writes_.clear();
    if (!writing_ && !writes_.empty()) {
      current_write_ = std::move(writes_.front());
      writes_.pop_front();
      writing_ = write = true;
    }
    if (!reading_ && !reads_done_ && inflight_ < kMaxInflightPerStream) {
      incoming_ = std::make_unique<ModelInferRequest>();
      reading_ = read = true;
    }
    if (!finished_ && reads_done_ && inflight_ == 0 && !writing_ && writes_.empty()) {
      finished_ = finish = true;
      cancelled = broken_;
    }
  }
  if (write) stream_.Write(*current_write_, &write_done_);
  if (read) stream_.Read(incoming_.get(), &read_done_);
  if (finish) stream_.Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK, &finished_event_);
}

}  // namespace inferd
