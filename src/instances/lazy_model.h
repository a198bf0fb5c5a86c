// A model instance loaded at its first execution: `parameters { key: "load" value: { string_value:
// "lazy" } }`. The version is ready as soon as its config is read and checked against the model
// file (its structure); the weights, kernel tuning and planned batch sizes come with the first
// execution of each instance: a request's, a warmup sample's (model_warmup makes a lazy model load
// during its load, as an eager one) or a keep-warm run's. A model that fails then answers every
// execution with that error, without loading again.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

class LazyModel final : public Model {
 public:
  LazyModel(Backend* backend, ModelConfig config, LoadOptions options)
      : backend_(backend), config_(std::move(config)), options_(std::move(options)) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override;
  // Prepared at the first execution, so there is nothing for the load to prepare.
  bool PreparesPerShape() const override { return false; }
  int64_t PreparedShapes() const override { return model_ ? model_->PreparedShapes() : 0; }
  bool loaded() const { return model_ != nullptr; }

 private:
  Backend* const backend_;
  const ModelConfig config_;
  const LoadOptions options_;
  std::unique_ptr<Model> model_;
  Status failed_;
};

}  // namespace inferd
