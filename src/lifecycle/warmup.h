// Runs config.pbtxt's model_warmup samples on one freshly loaded instance before it serves, so the
// first real request does not pay for lazy initialisation.
#pragma once

#include <filesystem>

#include "backends/backend.h"
#include "config/model_config.h"

namespace inferd {

Status RunWarmup(const ModelConfig& config, const std::filesystem::path& model_dir, Model* model);

// The inputs of one keep-warm request (keep_warm_interval_seconds): the first model_warmup sample,
// or zeros at batch 1 in the config's dims. An error when there is neither (no warmup sample, and
// an input with a variable dim or of type BYTES).
StatusOr<std::vector<Tensor>> KeepWarmInputs(const ModelConfig& config, const std::filesystem::path& model_dir);

// The execution input one warmup sample describes (exposed for tests).
StatusOr<ExecutionBatch> BuildWarmupBatch(const ModelConfig& config, const inference::ModelWarmup& sample,
                                          const std::filesystem::path& model_dir);

}  // namespace inferd
