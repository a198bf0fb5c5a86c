#include "backends/backend.h"

#include "backends/builtin/builtin_backends.h"
#include "backends/onnx/onnx_backend.h"
#include "runtime/tuning.h"

namespace inferd {

bool IsWrittenByBackend(const std::filesystem::path& file) {
  return file.filename().string().ends_with(runtime::kTuningCacheSuffix);
}

const Tensor* ExecutionBatch::FindInput(std::string_view name) const {
  for (const auto& tensor : inputs) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

void RowFailures::Fail(int64_t row, Status status) { failed_.emplace_back(row, std::move(status)); }

const Status* RowFailures::Find(int64_t first, int64_t rows) const {
  for (const auto& [row, status] : failed_) {
    if (row >= first && row < first + rows) return &status;
  }
  return nullptr;
}

Status ExecutionBatch::FailRow(int64_t row, Status status) const {
  if (row_failures == nullptr) return status;
  row_failures->Fail(row + row_offset, std::move(status));
  return Status::Ok();
}

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  std::string key(backend->name());
  backends_[key] = std::move(backend);
}

StatusOr<Backend*> BackendRegistry::Select(const ModelConfig& config) const {
  std::string name = config.backend();
  if (name.empty()) {
    // Triton's platform names map onto backends; inferd's ONNX engine serves both ONNX names.
    if (config.platform() == "onnxruntime_onnx" || config.platform() == "onnx")
      name = "onnxruntime";
    else
      name = config.platform();
  }
  auto it = backends_.find(name);
  if (it == backends_.end()) {
    std::string known;
    for (const auto& [key, unused] : backends_) known += (known.empty() ? "" : ", ") + key;
    return Status::InvalidArgument("model '" + config.name() + "': unknown backend '" + name +
                                   "' (this build has: " + known + ")");
  }
  return it->second.get();
}

BackendRegistry BackendRegistry::WithBuiltins() {
  BackendRegistry registry;
  RegisterBuiltinBackends(&registry);
  RegisterOnnxBackend(&registry);
  return registry;
}

}  // namespace inferd
