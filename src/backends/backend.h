// The backend boundary. A backend knows nothing of HTTP, batching or versions: it loads a model
// version from its folder and executes batches that the scheduler has already assembled.
//
// Loader contract (after TF Serving's loader.h):
//  - Backend::Load is the expensive step (read files, build plans); it runs once per instance, on
//    a lifecycle thread, never on an I/O thread.
//  - The returned Model is owned by exactly one instance thread; Execute is never called
//    concurrently on the same Model, so a Model needs no locking of its own.
//  - Destroying the Model releases everything (the "unload").
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "config/model_config.h"

namespace inferd {

// Rows of one execution that failed alone (one corrupt image among good ones): the server answers
// the requests owning them with their error and the other requests with their outputs.
class RowFailures {
 public:
  void Fail(int64_t row, Status status);
  // The first failure among rows [first, first + rows), or nullptr.
  const Status* Find(int64_t first, int64_t rows) const;
  bool empty() const { return failed_.empty(); }

 private:
  std::vector<std::pair<int64_t, Status>> failed_;  // few: failures are rare
};

// One execution's inputs: each tensor holds every request of the batch, concatenated along dim 0
// when the model batches (max_batch_size > 0), in the order of the config's inputs.
struct ExecutionBatch {
  int64_t batch_size = 1;
  std::vector<Tensor> inputs;
  // Set by the server when it can fail rows one by one; row r here is row r + row_offset there.
  RowFailures* row_failures = nullptr;
  int64_t row_offset = 0;

  const Tensor* FindInput(std::string_view name) const;
  // A backend that finds one row bad calls this and, if it returns Ok, carries on with the other
  // rows (leaving the bad row's outputs zero); if it returns the error (no collector: warmup, a
  // direct caller), the backend fails the whole execution with it.
  Status FailRow(int64_t row, Status status) const;
};

// What the server tells a backend about one instance it loads.
struct LoadOptions {
  std::filesystem::path version_dir;  // <repository>/<model>/<version>
  // Threads one execution may use. The server divides its cores among a model's instances, so
  // instances x intra_op_threads never exceeds them.
  int intra_op_threads = 1;
};

// What a prepared instance holds: its weights (as loaded, and as repacked for its kernels) and its
// working memory (the memory plan's arena, scratch). The server estimates a further instance's
// need from the first one's (lifecycle/memory_admission.h).
struct MemoryFootprint {
  int64_t weights_bytes = 0;
  int64_t working_bytes = 0;
  int64_t total() const { return weights_bytes + working_bytes; }
};

class Model {
 public:
  virtual ~Model() = default;
  // Fills `outputs` with whole-batch tensors (dim 0 == batch_size when the model batches).
  virtual Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) = 0;

  // True when the model prepares itself on its first execution with each new set of input shapes
  // (kernel tuning, memory planning: seconds for a CNN) and keeps what it prepared. The server then
  // prepares a few batch sizes before the model serves and runs every batch through them
  // (instances/planned_batches.h).
  virtual bool PreparesPerShape() const { return false; }
  // How many times the model has prepared an input shape set so far (again for one it had prepared
  // and then let go of). Read by the executing thread only.
  virtual int64_t PreparedShapes() const { return 0; }
  // nullopt: the backend does not account for its memory.
  virtual std::optional<MemoryFootprint> Footprint() const { return std::nullopt; }
};

// Whether a file in a version folder is one a backend writes there for itself (the ONNX
// backend's kernel tuning cache, MODEL.onnx.tuning) rather than part of the model: poll mode
// ignores their changes, or a first load would trigger a reload.
bool IsWrittenByBackend(const std::filesystem::path& file);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The file a version folder must contain when config.pbtxt names none; empty: no file needed.
  virtual std::string DefaultModelFilename() const { return ""; }
  virtual StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) = 0;
  // Whether an execution runs on a team of LoadOptions::intra_op_threads (so the team's size is
  // worth tuning); built-in backends run on the instance's thread alone.
  virtual bool UsesIntraOpThreads() const { return false; }
  // Fills what config.pbtxt left out (inputs, outputs, max_batch_size) from the model file in
  // `version_dir`, and checks what it did say against the model, as Triton's auto-complete does.
  // Built-in backends have no model file and leave the config alone.
  virtual Status CompleteConfig(const std::filesystem::path& version_dir, ModelConfig* config) const {
    (void)version_dir;
    (void)config;
    return Status::Ok();
  }
};

// Backends register by name; a config selects one with `backend:` or `platform:`.
class BackendRegistry {
 public:
  void Register(std::unique_ptr<Backend> backend);
  // Finds the backend named by config.backend(), or mapped from config.platform().
  StatusOr<Backend*> Select(const ModelConfig& config) const;

  // A registry holding every backend compiled into this binary.
  static BackendRegistry WithBuiltins();

 private:
  std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends_;
};

}  // namespace inferd
