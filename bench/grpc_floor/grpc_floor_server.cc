// The floor under inferd's gRPC numbers: a gRPC C++ server (same library, same service, the same
// completion-queue API as inferd, one polling thread) whose ModelInfer copies its input to its
// output inline on the poller. No queue, no instance thread, no validation: whatever this costs per
// call, inferd's gRPC frontend cannot cost less. bench/protocol_bench.py runs it next to inferd, as
// bench/http_bench.py runs nginx.
//
//   grpc_floor_server 127.0.0.1:PORT
//
// It answers ModelMetadata (one FP32 input INPUT0 and output OUTPUT0 of dims [1, 16]) so that
// `inferd bench -i grpc` can drive it, and ModelInfer; every other RPC is UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "common/stop_signals.h"
#include "grpc_service.grpc.pb.h"

namespace {

// Only these two are asynchronous: an async method nobody requests would leave its callers waiting
// forever, while the other (synchronous, unimplemented) methods answer UNIMPLEMENTED.
using Service = inference::GRPCInferenceService::WithAsyncMethod_ModelMetadata<
    inference::GRPCInferenceService::WithAsyncMethod_ModelInfer<inference::GRPCInferenceService::Service>>;

// Cleared before the server shuts down: no call is offered to a queue about to shut down (only the
// poller offers, and it drains the queue's remaining events after).
std::atomic<bool> accepting{true};

// One call of either method: offered to gRPC, answered when it arrives, freed when answered.
class Call {
 public:
  virtual ~Call() = default;
  // Returns false once the call is over (the poller frees it).
  virtual bool Proceed(bool ok) = 0;
};

template <typename Request, typename Response>
class UnaryCall final : public Call {
 public:
  using Answer = grpc::Status (*)(const Request&, Response*);
  using Offer = void (Service::*)(grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
                                  grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);

  static void Expect(Service* service, grpc::ServerCompletionQueue* queue, Offer offer, Answer answer) {
    if (!accepting.load()) return;
    auto* call = new UnaryCall(service, queue, offer, answer);
    (service->*offer)(&call->context_, &call->request_, &call->responder_, queue, queue, call);
  }

  bool Proceed(bool ok) override {
    if (answered_ || !ok) return false;
    Expect(service_, queue_, offer_, answer_);
    answered_ = true;
    grpc::Status status = answer_(request_, &response_);
    if (status.ok()) {
      responder_.Finish(response_, status, this);
    } else {
      responder_.FinishWithError(status, this);
    }
    return true;
  }

 private:
  UnaryCall(Service* service, grpc::ServerCompletionQueue* queue, Offer offer, Answer answer)
      : service_(service), queue_(queue), offer_(offer), answer_(answer) {}

  Service* const service_;
  grpc::ServerCompletionQueue* const queue_;
  const Offer offer_;
  const Answer answer_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&context_};
  bool answered_ = false;
};

void DescribeTensor(inference::ModelMetadataResponse::TensorMetadata* tensor, const char* name) {
  tensor->set_name(name);
  tensor->set_datatype("FP32");
  tensor->add_shape(1);
  tensor->add_shape(16);
}

grpc::Status ModelMetadata(const inference::ModelMetadataRequest& request,
                           inference::ModelMetadataResponse* response) {
  response->set_name(request.name());
  response->add_versions("1");
  response->set_platform("grpc_floor");
  DescribeTensor(response->add_inputs(), "INPUT0");
  DescribeTensor(response->add_outputs(), "OUTPUT0");
  return grpc::Status::OK;
}

grpc::Status ModelInfer(const inference::ModelInferRequest& request,
                        inference::ModelInferResponse* response) {
  if (request.inputs_size() != 1 || request.raw_input_contents_size() != 1)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one raw input expected");
  response->set_model_name(request.model_name());
  response->set_model_version("1");
  auto* output = response->add_outputs();
  output->set_name("OUTPUT0");
  output->set_datatype(request.inputs(0).datatype());
  *output->mutable_shape() = request.inputs(0).shape();
  *response->add_raw_output_contents() = request.raw_input_contents(0);
  return grpc::Status::OK;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ADDRESS:PORT\n", argv[0]);
    return 2;
  }
  // Stopped by SIGTERM (the bench) or SIGINT, blocked before gRPC starts its threads.
  const sigset_t stop_signals = inferd::BlockStopSignals();
  Service service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(argv[1], grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::ServerCompletionQueue> queue = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", argv[1]);
    return 1;
  }
  using MetadataCall = UnaryCall<inference::ModelMetadataRequest, inference::ModelMetadataResponse>;
  using InferCall = UnaryCall<inference::ModelInferRequest, inference::ModelInferResponse>;
  MetadataCall::Expect(&service, queue.get(), &Service::RequestModelMetadata, &ModelMetadata);
  for (int i = 0; i < 32; ++i)
    InferCall::Expect(&service, queue.get(), &Service::RequestModelInfer, &ModelInfer);
  std::thread poller([&queue] {
    void* tag = nullptr;
    bool ok = false;
    while (queue->Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      if (!call->Proceed(ok)) delete call;
    }
  });
  std::printf("listening on %s\n", argv[1]);
  std::fflush(stdout);
  inferd::WaitForStopSignal(stop_signals);
  accepting.store(false);
  server->Shutdown();
  queue->Shutdown();
  poller.join();
  return 0;
}
