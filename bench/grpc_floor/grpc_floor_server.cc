// The floor under inferd's gRPC numbers: a gRPC C++ server (same library, same callback API, same
// service) whose ModelInfer copies its input to its output inline on gRPC's own thread. No queue,
// no instance thread, no validation: whatever this costs per call, inferd's gRPC frontend cannot
// cost less. bench/protocol_bench.py runs it next to inferd, as bench/http_bench.py runs nginx.
//
//   grpc_floor_server 127.0.0.1:PORT
//
// It answers ModelMetadata (one FP32 input INPUT0 and output OUTPUT0 of dims [1, 16]) so that
// `inferd bench -i grpc` can drive it, and ModelInfer; every other RPC is UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <memory>

#include "common/stop_signals.h"
#include "grpc_service.grpc.pb.h"

namespace {

class FloorService final : public inference::GRPCInferenceService::CallbackService {
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    response->set_name(request->name());
    response->add_versions("1");
    response->set_platform("grpc_floor");
    DescribeTensor(response->add_inputs(), "INPUT0");
    DescribeTensor(response->add_outputs(), "OUTPUT0");
    return Finish(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    if (request->inputs_size() != 1 || request->raw_input_contents_size() != 1) {
      return Finish(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one raw input expected"));
    }
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    auto* output = response->add_outputs();
    output->set_name("OUTPUT0");
    output->set_datatype(request->inputs(0).datatype());
    *output->mutable_shape() = request->inputs(0).shape();
    *response->add_raw_output_contents() = request->raw_input_contents(0);
    return Finish(context, grpc::Status::OK);
  }

  static void DescribeTensor(inference::ModelMetadataResponse::TensorMetadata* tensor, const char* name) {
    tensor->set_name(name);
    tensor->set_datatype("FP32");
    tensor->add_shape(1);
    tensor->add_shape(16);
  }

  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ADDRESS:PORT\n", argv[0]);
    return 2;
  }
  // Stopped by SIGTERM (the bench) or SIGINT, blocked before gRPC starts its threads.
  const sigset_t stop_signals = inferd::BlockStopSignals();
  FloorService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(argv[1], grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", argv[1]);
    return 1;
  }
  std::printf("listening on %s\n", argv[1]);
  std::fflush(stdout);
  inferd::WaitForStopSignal(stop_signals);
  server->Shutdown();
  return 0;
}
