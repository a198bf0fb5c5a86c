#include "server/client_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <map>

#include "client/client.h"
#include "client/input_data.h"
#include "common/npy.h"
#include "frontends/http/kserve_codec.h"

namespace inferd {

void AddConnectionFlags(CLI::App* command, ConnectionFlags* flags) {
  command->add_option("-u,--url", flags->url, "Server host:port (default localhost:8000 for http, :8001 for grpc)");
  command->add_option("-i,--protocol", flags->protocol, "http or grpc")
      ->check(CLI::IsMember({"http", "grpc"}))
      ->capture_default_str();
  command->add_option("--timeout-ms", flags->timeout_ms, "Per-call timeout (gRPC: the deadline); 0 for none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

StatusOr<std::unique_ptr<client::Client>> ConnectFrom(const ConnectionFlags& flags, bool binary,
                                                     int async_connections) {
  const bool grpc = flags.protocol == "grpc";
  return client::Connect({.url = flags.url.empty() ? (grpc ? "localhost:8001" : "localhost:8000") : flags.url,
                          .protocol = grpc ? client::Protocol::kGrpc : client::Protocol::kHttp,
                          .binary = binary,
                          .timeout = std::chrono::milliseconds(flags.timeout_ms),
                          .async_connections = async_connections});
}

int Fail(const Status& status) {
  std::fprintf(stderr, "error: %s (%s)\n", status.message().c_str(), std::string(StatusCodeName(status.code())).c_str());
  return 1;
}

namespace {

// The request's inputs: files where given, random data shaped from the metadata otherwise.
StatusOr<std::vector<Tensor>> BuildInputs(const InferFlags& flags, const client::ModelMetadata& metadata) {
  std::map<std::string, std::string> files;
  for (const std::string& spec : flags.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("--input '" + spec + "' is not NAME=FILE");
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  ASSIGN_OR_RETURN(auto shapes, client::ParseShapeFlags(flags.shapes));
  const bool batching = client::HasBatchDim(metadata);
  std::vector<Tensor> inputs;
  std::mt19937 rng(1);
  for (const client::TensorMetadata& input : metadata.inputs) {
    if (auto file = files.find(input.name); file != files.end()) {
      ASSIGN_OR_RETURN(Tensor tensor, client::ReadInputFile(input, file->second));
      inputs.push_back(std::move(tensor));
      files.erase(file);
      continue;
    }
    ASSIGN_OR_RETURN(Shape shape, client::ResolveShape(input, batching, 1, shapes));
    ASSIGN_OR_RETURN(Tensor tensor, client::MakeInput(input, shape, client::Fill::kRandom, &rng));
    inputs.push_back(std::move(tensor));
  }
  if (!files.empty()) return Status::InvalidArgument("model '" + metadata.name + "' has no input '" + files.begin()->first + "'");
  return inputs;
}

}  // namespace

void AddInferFlags(CLI::App* command, InferFlags* flags) {
  AddConnectionFlags(command, &flags->connection);
  command->add_option("-m,--model", flags->model, "Model name")->required();
  command->add_option("-v,--version", flags->version, "Model version (default: the server's choice)");
  command->add_option("--input", flags->inputs,
                      "NAME=FILE.npy or NAME=FILE.json (a nested JSON array); repeatable. Inputs not given "
                      "get random data shaped from the model's metadata");
  command->add_option("--shape", flags->shapes, "NAME:d1,d2,... for a random input with variable dims (no batch dim)");
  command->add_option("--output", flags->outputs, "Only these outputs; repeatable");
  command->add_option("--output-dir", flags->output_dir, "Write each output to DIR/NAME.npy instead of printing JSON");
  command->add_flag("--json-tensors", flags->json_tensors, "HTTP: send tensors as JSON arrays, not binary");
}

int RunInfer(const InferFlags& flags) {
  auto client = ConnectFrom(flags.connection, !flags.json_tensors);
  if (!client.ok()) return Fail(client.status());
  auto metadata = (*client)->GetModelMetadata(flags.model, flags.version);
  if (!metadata.ok()) return Fail(metadata.status());
  InferRequest request{.model_name = flags.model, .model_version = flags.version, .requested_outputs = flags.outputs};
  auto inputs = BuildInputs(flags, *metadata);
  if (!inputs.ok()) return Fail(inputs.status());
  request.inputs = std::move(*inputs);
  auto response = (*client)->Infer(request);
  if (!response.ok()) return Fail(response.status());
  if (flags.output_dir.empty()) {
    std::printf("%s\n", EncodeInferResponse(*response, OutputEncoding{}).body.c_str());
    return 0;
  }
  std::filesystem::create_directories(flags.output_dir);
  for (const Tensor& output : response->outputs) {
    const std::string path = (std::filesystem::path(flags.output_dir) / (output.name + ".npy")).string();
    if (Status status = WriteNpy(path, output); !status.ok()) return Fail(status);
    std::printf("%s %s %s -> %s\n", output.name.c_str(), std::string(DataTypeName(output.dtype)).c_str(),
                ShapeToString(output.shape).c_str(), path.c_str());
  }
  return 0;
}

void AddModelsFlags(CLI::App* command, ModelsFlags* flags) { AddConnectionFlags(command, &flags->connection); }

int RunModels(const ModelsFlags& flags) {
  auto client = ConnectFrom(flags.connection);
  if (!client.ok()) return Fail(client.status());
  auto index = (*client)->GetRepositoryIndex();
  if (!index.ok()) return Fail(index.status());
  // Seconds with millisecond precision; "-" where the server does not say (or no request yet).
  auto seconds = [](double value) {
    char text[32];
    if (value < 0) return std::string("-");
    std::snprintf(text, sizeof text, "%.3f", value);
    return std::string(text);
  };
  std::printf("%-32s %-8s %-12s %-9s %-9s %-9s %s\n", "MODEL", "VERSION", "STATE", "LOAD_S", "WARMUP_S", "FIRST_S",
              "REASON");
  for (const client::RepositoryEntry& entry : *index) {
    std::printf("%-32s %-8s %-12s %-9s %-9s %-9s %s\n", entry.name.c_str(),
                entry.version.empty() ? "-" : entry.version.c_str(), entry.state.empty() ? "-" : entry.state.c_str(),
                seconds(entry.load_seconds).c_str(), seconds(entry.warmup_seconds).c_str(),
                seconds(entry.first_request_seconds).c_str(), entry.reason.c_str());
  }
  return 0;
}

void AddHealthFlags(CLI::App* command, HealthFlags* flags) {
  AddConnectionFlags(command, &flags->connection);
  command->add_flag("--live", flags->live, "Ask whether the server is live (/v2/health/live) instead of ready");
}

int RunHealth(const HealthFlags& flags) {
  ConnectionFlags connection = flags.connection;
  if (connection.timeout_ms == 0) connection.timeout_ms = 5000;  // a probe must not hang
  auto client = ConnectFrom(connection);
  if (!client.ok()) return Fail(client.status());
  auto healthy = flags.live ? (*client)->ServerLive() : (*client)->ServerReady();
  if (!healthy.ok()) return Fail(healthy.status());
  std::printf("%s\n", *healthy ? (flags.live ? "live" : "ready") : (flags.live ? "not live" : "not ready"));
  return *healthy ? 0 : 1;
}

}  // namespace inferd
