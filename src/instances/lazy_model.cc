#include "instances/lazy_model.h"

#include <spdlog/spdlog.h>

#include "instances/planned_batches.h"

namespace inferd {

Status LazyModel::Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) {
  if (!model_) {
    if (!failed_.ok()) return failed_;
    auto loaded = backend_->Load(config_, options_);
    auto prepared = loaded.ok() ? PrepareBatchSizes(std::move(loaded).value(), config_) : loaded.status();
    if (!prepared.ok()) {
      failed_ = Status(StatusCode::kUnavailable, "model '" + config_.name() + "' failed to load lazily: " +
                                                     prepared.status().message());
      spdlog::error("{}", failed_.message());
      return failed_;
    }
    model_ = std::move(prepared).value();
    spdlog::info("model '{}': loaded lazily at its first execution", config_.name());
  }
  return model_->Execute(batch, outputs);
}

}  // namespace inferd
