// The floor under inferd's gRPC numbers: a gRPC C++ server (same library, same service, and
// inferd's own call machinery: CallQueues with one poller, UnaryRouteFor) whose ModelInfer copies
// its input to its output inline on the poller. No queue, no instance thread, no validation: whatever this
// costs per call, inferd's gRPC frontend cannot cost less. bench/protocol_bench.py runs it next to inferd, as
// bench/http_bench.py runs nginx.
//
//   grpc_floor_server 127.0.0.1:PORT
//
// It answers ModelMetadata (one FP32 input INPUT0 and output OUTPUT0 of dims [1, 16]) so that
// `inferd bench -i grpc` can drive it, and ModelInfer; every other RPC is UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <functional>
#include <memory>

#include "common/stop_signals.h"
#include "frontends/grpc/call_queues.h"
#include "grpc_service.grpc.pb.h"

namespace {

// Only these two are asynchronous: an async method nobody requests would leave its callers waiting
// forever, while the other (synchronous, unimplemented) methods answer UNIMPLEMENTED.
using Service = inference::GRPCInferenceService::WithAsyncMethod_ModelMetadata<
    inference::GRPCInferenceService::WithAsyncMethod_ModelInfer<inference::GRPCInferenceService::Service>>;

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

// The answer, given inline on the poller.
template <typename Request, typename Response>
inferd::UnaryHandler<Request, Response> AtOnce(grpc::Status (*answer)(const Request&, Response*)) {
  return [answer](grpc::ServerContext&, Request& request, Response* response,
                  std::function<void(const grpc::Status&)> finish) { finish(answer(request, response)); };
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
  auto queues = std::make_unique<inferd::CallQueues>(builder, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", argv[1]);
    return 1;
  }
  inferd::UnaryRouteFor<Service, inference::ModelMetadataRequest, inference::ModelMetadataResponse> metadata(
      queues.get(), &service, &Service::RequestModelMetadata, AtOnce(&ModelMetadata));
  inferd::UnaryRouteFor<Service, inference::ModelInferRequest, inference::ModelInferResponse> infer(
      queues.get(), &service, &Service::RequestModelInfer, AtOnce(&ModelInfer), /*offered_per_queue=*/32);
  metadata.OfferAll();
  infer.OfferAll();
  queues->Start();
  std::printf("listening on %s\n", argv[1]);
  std::fflush(stdout);
  inferd::WaitForStopSignal(stop_signals);
  server->Shutdown();
  queues->Stop();
  return 0;
}
