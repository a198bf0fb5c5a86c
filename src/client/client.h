// inferd's client library: the KServe v2 protocol over HTTP (JSON or the binary tensor extension)
// or gRPC, behind one interface. It speaks the public protocol only, so it works against Triton
// too. Requests and responses are the server's own types (common/infer_request.h): a tensor is a
// name, datatype, shape and raw little-endian bytes (BYTES: 4-byte length, then bytes, per element).
//
//   auto client = inferd::client::Connect({.url = "localhost:8001", .protocol = Protocol::kGrpc});
//   InferRequest request{.model_name = "add_sub", .inputs = {...}};
//   StatusOr<InferResponse> response = (*client)->Infer(request);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/infer_request.h"
#include "common/status.h"
#include "common/traffic_plan.h"

namespace inferd::client {

enum class Protocol { kHttp, kGrpc };

struct ClientOptions {
  std::string url = "localhost:8000";  // host:port, with or without http://
  Protocol protocol = Protocol::kHttp;
  // HTTP only: send and ask for tensors in the binary extension (false: plain JSON arrays).
  bool binary = true;
  // Per call; 0 for none. Over gRPC it is the call's deadline, which the server honours by
  // dropping a request still queued when it passes.
  std::chrono::milliseconds timeout{0};
  // InferAsync: HTTP runs this many connections (each a thread waiting on its socket); gRPC needs
  // no threads of its own and ignores it.
  int async_connections = 4;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;  // -1: any size
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorMetadata> inputs, outputs;
};

struct RepositoryEntry {
  std::string name;
  std::string version;  // empty when the model has no loaded version
  std::string state;    // READY, UNAVAILABLE, or empty when never loaded
  std::string reason;
  // inferd servers, READY versions: seconds of the load, its warmup part, the first request (-1: unknown).
  double load_seconds = -1, warmup_seconds = -1, first_request_seconds = -1;
};

// The server-side split of one model version's time, from its statistics.
struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t success_count = 0, success_ns = 0;
  uint64_t queue_count = 0, queue_ns = 0;
  uint64_t compute_input_ns = 0, compute_infer_ns = 0, compute_output_ns = 0;
};

// inferd's lifecycle calls (not in KServe v2): the split and labels in force...
struct TrafficInfo {
  TrafficSplit split;
  VersionLabelMap labels;
};

// ...and a rollout's state (GET /v2/models/M/rollout).
struct RolloutInfo {
  RolloutPlan plan;
  std::string state;  // running, completed, rolled_back
  uint32_t step = 0;  // from 1
  uint32_t percent = 0;
  double in_step_seconds = 0;
  std::string reason;
  uint64_t requests = 0, errors = 0, baseline_requests = 0;
  double p99_ms = 0, baseline_p99_ms = 0;
  MirrorCounts mirrored;  // this step's mirrored pairs (agreement guard)
  bool baseline_retired = false;
  int64_t retire_in_seconds = -1;
};

// A region registered with the server's system shared-memory extension.
struct SharedMemoryRegionInfo {
  std::string name;
  std::string key;  // the shm_open name of the object that holds it
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

class Client {
 public:
  virtual ~Client() = default;

  virtual StatusOr<bool> ServerLive() = 0;
  virtual StatusOr<bool> ServerReady() = 0;
  // version 0: whichever the server picks.
  virtual StatusOr<bool> ModelReady(const std::string& model, int64_t version = 0) = 0;
  virtual StatusOr<ModelMetadata> GetModelMetadata(const std::string& model, int64_t version = 0) = 0;
  // Every loaded version of `model` when version is 0.
  virtual StatusOr<std::vector<ModelStatistics>> GetModelStatistics(const std::string& model,
                                                                    int64_t version = 0) = 0;
  virtual StatusOr<std::vector<RepositoryEntry>> GetRepositoryIndex() = 0;
  // The config the server serves the model with (GET /v2/models/M/config, or the ModelConfig RPC)
  // as JSON with the protobuf field names Triton uses: what LoadModel takes back.
  virtual StatusOr<std::string> GetModelConfigJson(const std::string& model) = 0;
  // Loads (or reloads) the model with its repository config.pbtxt...
  Status LoadModel(const std::string& model) { return LoadModel(model, std::string()); }
  // ...or with this config instead (Triton's "config" load parameter; empty: the repository's).
  virtual Status LoadModel(const std::string& model, const std::string& config_json) = 0;
  virtual Status UnloadModel(const std::string& model) = 0;

  // inferd only: traffic between a model's versions and canary rollouts.
  virtual StatusOr<TrafficInfo> GetTraffic(const std::string& model) = 0;
  virtual StatusOr<TrafficInfo> SetTraffic(const std::string& model, const TrafficChange& change) = 0;
  virtual StatusOr<RolloutInfo> StartRollout(const std::string& model, const RolloutPlan& plan) = 0;
  virtual StatusOr<RolloutInfo> GetRollout(const std::string& model) = 0;
  virtual StatusOr<RolloutInfo> RollbackRollout(const std::string& model) = 0;

  // Triton's system shared-memory extension (client/shared_memory.h makes the regions). A request
  // then names regions in InferRequest::input_regions and output_regions; the answer's
  // output_regions say how many bytes each output wrote. An empty name: every region.
  virtual Status RegisterSystemSharedMemory(const std::string& name, const std::string& key, uint64_t offset,
                                            uint64_t byte_size) = 0;
  virtual Status UnregisterSystemSharedMemory(const std::string& name) = 0;
  virtual StatusOr<std::vector<SharedMemoryRegionInfo>> GetSystemSharedMemoryStatus(const std::string& name) = 0;

  // Blocks until the answer (or the timeout). A server error comes back as its Status: the HTTP
  // status or gRPC code is mapped back to the StatusCode the server meant.
  virtual StatusOr<InferResponse> Infer(const InferRequest& request) = 0;
  // Returns at once; `done` runs exactly once, on a client thread. The request is copied first,
  // so the caller's may go away.
  virtual void InferAsync(const InferRequest& request, InferCallback done) = 0;
};

StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

}  // namespace inferd::client
