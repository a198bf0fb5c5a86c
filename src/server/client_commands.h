// `inferd infer`, `inferd models` and `inferd health`: the client library from the command line, against any
// KServe v2 server (inferd or Triton) over HTTP or gRPC.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/status.h"

namespace CLI {
class App;
}

namespace inferd {

struct ConnectionFlags {
  std::string url;  // default by protocol: localhost:8000 (http), localhost:8001 (grpc)
  std::string protocol = "http";
  int timeout_ms = 0;
};

struct InferFlags {
  ConnectionFlags connection;
  std::string model;
  int64_t version = 0;
  std::vector<std::string> inputs;  // NAME=FILE.npy|FILE.json
  std::vector<std::string> shapes;  // NAME:d1,d2 for inputs not given (random data)
  std::vector<std::string> outputs;
  std::string output_dir;
  bool json_tensors = false;
};

struct ModelsFlags {
  ConnectionFlags connection;
};

struct HealthFlags {
  ConnectionFlags connection;
  bool live = false;  // ask /v2/health/live instead of /v2/health/ready
};

void AddConnectionFlags(CLI::App* command, ConnectionFlags* flags);
// A client for the flags (the URL defaults by protocol). binary: HTTP tensors in the binary extension.
StatusOr<std::unique_ptr<client::Client>> ConnectFrom(const ConnectionFlags& flags, bool binary = true,
                                                     int async_connections = 4);
// Prints "error: MESSAGE (CODE)" to stderr; returns the exit code 1.
int Fail(const Status& status);
void AddInferFlags(CLI::App* command, InferFlags* flags);
void AddModelsFlags(CLI::App* command, ModelsFlags* flags);
int RunInfer(const InferFlags& flags);
int RunModels(const ModelsFlags& flags);
// `inferd health`: exit 0 when the server is ready (live with --live), 1 otherwise: a probe for a
// container image's HEALTHCHECK, which has no curl.
void AddHealthFlags(CLI::App* command, HealthFlags* flags);
int RunHealth(const HealthFlags& flags);

}  // namespace inferd
